"""Marker barriers: prove that nothing (more) arrived, without waiting for quiet.

"Nothing arrived within half a second" passes when the broker is merely slow.
A barrier instead sends a marker down the path an unwanted message would take
(the same destination, from the same producer, so the broker keeps the order),
waits (bounded) until the consumer receives the marker, and returns what came
before it: anything the broker had routed to that consumer by then.

    await conn.send(ORDERS, "x")                       # the action
    assert await before_marker(conn, GROUP_B, b) == []  # B got nothing
    assert await before_marker(conn, GROUP_A, a) == ["x"]  # exactly one copy

Where the path does not order the marker after the unwanted message (another
producer, a destination that forwards everything elsewhere), wait for the marker
where it does arrive and then read the management counters (`enqueued`,
`dispatched`) of the destination that must have stayed empty.

Markers carry the property `MARKER_PROPERTY`; a barrier skips the markers of
earlier barriers (one destination forwarding to two consumers gets two markers).

`before_marker` works with any client of `relaymq.testing.transports` (the
vm:// `Connection`, `StompClient`, `AmqpClient`); `stomp_before_marker` with a
stomp.py connection and a `Collector`; `amqp_before_marker` with a proton
`BlockingConnection` and one of its receivers.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from relaymq.testing.waits import DEFAULT_TIMEOUT

#: the application property every marker carries (its value: the marker's body)
MARKER_PROPERTY = "relaymq_test_marker"


def new_marker() -> str:
    return f"marker-{uuid.uuid4()}"


def _text(body: Any) -> str:
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body).decode(errors="replace")
    return str(body)


async def before_marker(producer: Any, destination: str, consumer: Any, *,
                        properties: dict[str, Any] | None = None, ack: bool = False,
                        timeout: float = DEFAULT_TIMEOUT, **send_options: Any) -> list[str]:
    """Send a marker to `destination` over `producer`; return the texts `consumer`
    receives before the marker (AssertionError when the marker does not come).

    `properties` are added to the marker (so it matches the consumer's selector);
    `ack` acknowledges what arrived, marker included (client acknowledgement);
    `send_options` go to `producer.send` (`priority=0` puts the marker behind
    everything on a prioritized queue)."""
    marker = new_marker()
    await producer.send(destination, marker, properties={**(properties or {}),
                                                         MARKER_PROPERTY: marker}, **send_options)
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        m = await consumer.receive(max(remaining, 0.0)) if remaining > 0 else None
        if m is None:
            raise AssertionError(f"the marker sent to {destination} did not arrive within "
                                 f"{timeout:g} s; before it: {seen!r}")
        if ack:
            m.ack()
        if m.text == marker:
            return seen
        if MARKER_PROPERTY not in (m.properties or {}):  # an earlier barrier's marker
            seen.append(m.text)


async def assert_nothing_before_marker(producer: Any, destination: str, consumer: Any, *,
                                       properties: dict[str, Any] | None = None,
                                       ack: bool = False, timeout: float = DEFAULT_TIMEOUT,
                                       **send_options: Any) -> None:
    """`before_marker(...) == []`, with what did arrive in the failure."""
    seen = await before_marker(producer, destination, consumer, properties=properties, ack=ack,
                               timeout=timeout, **send_options)
    if seen:
        raise AssertionError(f"{len(seen)} message(s) arrived before the marker on "
                             f"{destination}: {seen[:20]!r}")


def stomp_before_marker(conn: Any, collector: Any, destination: str, *,
                        subscription: str | None = None, headers: dict[str, str] | None = None,
                        since: int = 0, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    """The stomp.py form: SEND a marker to `destination` (a STOMP name such as
    `/queue/X`) on `conn`, wait until `collector` (a `Collector` listening on the
    consuming connection) holds it, and return the bodies of the messages it
    collected before it, from index `since` on (only those of `subscription`,
    if given). The marker message stays in `collector.messages`."""
    marker = new_marker()
    conn.send(destination, marker, headers={**(headers or {}), MARKER_PROPERTY: marker})

    def mine() -> list[Any]:
        return [m for m in collector.messages[since:]
                if subscription is None or m.headers.get("subscription") == subscription]

    def arrived() -> bool:
        return any(_text(m.body) == marker for m in mine())

    if not collector.wait(arrived, timeout):
        raise AssertionError(f"the marker sent to {destination} did not arrive within "
                             f"{timeout:g} s; before it: {[_text(m.body) for m in mine()][:20]!r}"
                             f"; errors: {[e.headers.get('message') for e in collector.errors]!r}")
    with collector.cond:
        got = mine()
    bodies = [_text(m.body) for m in got]
    end = bodies.index(marker)
    return [bodies[i] for i in range(end) if MARKER_PROPERTY not in got[i].headers]


def amqp_before_marker(connection: Any, address: str, receiver: Any, *,
                       properties: dict[str, Any] | None = None,
                       timeout: float = DEFAULT_TIMEOUT) -> list[Any]:
    """The proton form: send a marker to `address` over the `BlockingConnection`
    `connection`, receive (and accept) from `receiver` until the marker comes,
    and return the bodies received before it."""
    from proton import Message, Timeout
    from proton.utils import LinkDetached

    marker = new_marker()
    sender = connection.create_sender(address, name=marker)  # its own link name
    try:
        sender.send(Message(body=marker, properties={**(properties or {}),
                                                     MARKER_PROPERTY: marker}))
    finally:
        sender.close()
    seen: list[Any] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            m = receiver.receive(timeout=max(deadline - time.monotonic(), 0.001))
        except (Timeout, LinkDetached) as exc:
            raise AssertionError(f"the marker sent to {address} did not arrive within "
                                 f"{timeout:g} s; before it: {seen[:20]!r}") from exc
        receiver.accept()
        if m.body == marker:
            return seen
        if MARKER_PROPERTY not in (m.properties or {}):  # an earlier barrier's marker
            seen.append(m.body)
