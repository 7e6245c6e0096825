"""RelayMQ: a message broker with a small kernel and pluggable features."""
__version__ = "0.1.0"
