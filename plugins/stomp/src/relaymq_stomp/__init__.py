"""RelayMQ STOMP 1.0/1.1/1.2 transport (stomp://, stomp+nio://, stomp+ssl://)"""
