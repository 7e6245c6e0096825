"""Selectors see AMQP property types as Java types (ActiveMQ's AMQP-to-JMS mapping):
int, short, byte, ubyte, ushort and small uints are Java ints and wrap at 32 bits;
long, ulong and large uints are longs; float is a Java float. Real proton clients,
real broker."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Message, byte, float32, int32, short, ubyte, uint, ulong, ushort
from proton.reactor import Selector


def _matching(connect: Any, queue: str, selector: str, properties: list[dict[str, Any]]) -> list[int]:
    """Send one message per property set (body = its index); return what the selector takes."""
    c = connect()
    s = c.create_sender(f"queue://{queue}")
    for i, props in enumerate(properties):
        s.send(Message(body=i, properties=props))
    r = c.create_receiver(f"queue://{queue}", credit=len(properties), name="sel",
                          options=Selector(selector))
    got = []
    # Everything was sent before the consumer attached: what matches is delivered at
    # once; a final message every selector matches marks the end.
    s.send(Message(body=-1, properties={"end": True}))
    while True:
        m = r.receive(timeout=10)
        r.accept()
        if m.body == -1:
            return got
        got.append(m.body)


@pytest.mark.parametrize(("selector", "properties", "expected"), [
    # int + int wraps as a Java int; a long does not
    ("v + 1 < 0", [{"v": int32(2147483647)}, {"v": 2147483647}], [0]),
    ("v * 65536 * 65536 = 0", [{"v": int32(1)}, {"v": short(1)}, {"v": byte(1)}, {"v": 1}], [0, 1, 2]),
    # ubyte/ushort are ints; a uint is an int when it fits, else a long (ActiveMQ's mapping)
    ("v + 2147483647 < 0", [{"v": ubyte(1)}, {"v": ushort(1)}, {"v": uint(1)}, {"v": ulong(1)}], [0, 1, 2]),
    ("v > 2147483647", [{"v": uint(3000000000)}, {"v": uint(5)}], [0]),
    # a float compared with an int literal: the int is rounded to a float
    ("v = 16777217", [{"v": float32(16777216.0)}, {"v": 16777216.0}, {"v": int32(16777217)}], [0, 2]),
    ("v = 1.1", [{"v": float32(1.1)}, {"v": 1.1}], [1]),
    ("v = 1.1F", [{"v": float32(1.1)}, {"v": 1.1}], [0]),
    # NOT on a non-boolean is UNKNOWN over AMQP (JMS), never matching
    ("NOT v OR end = TRUE", [{"v": "false"}, {"v": False}], [1]),
])
def test_amqp_property_types_in_selectors(connect: Any, selector: str,
                                          properties: list[dict[str, Any]],
                                          expected: list[int]) -> None:
    name = "types." + str(abs(hash(selector)))
    assert _matching(connect, name, f"({selector}) OR end = TRUE", properties) == expected
