"""Driver contracts (stores, transports, broker connections) that plugins implement."""
