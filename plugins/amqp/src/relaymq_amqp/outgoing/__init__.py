"""Outgoing AMQP connections: what broker connections (mirror, federation,
sender/receiver, peer) are built on. See `connection` for the whole story.

```python
from relaymq_amqp.outgoing import AmqpConnection

conn = AmqpConnection("tcp://b1:5672#tcp://b2:5672", user="u", password="p")
await conn.connect()
outcome = await (await conn.open_sender("queue://orders")).send(encoded_bytes)
```
"""

from relaymq_amqp.outgoing.common import (
    AmqpConnectionError,
    ConnectionLost,
    Endpoint,
    LinkRefused,
    Outcome,
    parse_uri,
)
from relaymq_amqp.outgoing.connection import AmqpConnection
from relaymq_amqp.outgoing.links import IncomingMessage, Receiver, Sender

__all__ = ["AmqpConnection", "AmqpConnectionError", "ConnectionLost", "Endpoint",
           "IncomingMessage", "LinkRefused", "Outcome", "Receiver", "Sender", "parse_uri"]
