"""The message constructors transports use on their per-message path."""

from __future__ import annotations

from relaymq.model.destination import Destination
from relaymq.model.message import (
    DEFAULT_PRIORITY,
    MESSAGE_FIELDS,
    BodyType,
    Message,
    wire_message,
)


def _fields(m: Message) -> dict[str, object]:
    assert len(MESSAGE_FIELDS) == 26
    return {name: getattr(m, name) for name in MESSAGE_FIELDS}


def test_wire_message_sets_every_field_like_the_constructor() -> None:
    dest = Destination.queue("orders")
    fast = wire_message(b"body", dest, BodyType.TEXT, b"raw", "amqp")
    slow = Message(b"body", destination=dest, body_type=BodyType.TEXT, encoded=b"raw",
                   encoding="amqp")
    # every slot is set (a missing one raises AttributeError here) and equal
    assert _fields(fast) == _fields(slow)
    assert fast.priority == DEFAULT_PRIORITY and fast.properties == {}


def test_wire_message_properties_and_loader() -> None:
    dest = Destination.topic("t")
    m = wire_message(b"", dest, BodyType.BYTES, None, None, {"k": 1})
    assert m.properties == {"k": 1}
    lazy = wire_message(b"", dest, BodyType.BYTES, None, None, None, lambda msg: {"n": 2})
    assert lazy.properties == {"n": 2}
    assert m.copy(priority=9).priority == 9 and m.size == len(b"") + 200
