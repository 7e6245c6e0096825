"""The asyncio client API for embedded RelayMQ brokers (`vm://`)."""

from relaymq.client.api import (
    ClientConsumer,
    Connection,
    ReceivedMessage,
    connect,
    connect_broker,
)

__all__ = ["ClientConsumer", "Connection", "ReceivedMessage", "connect", "connect_broker"]
