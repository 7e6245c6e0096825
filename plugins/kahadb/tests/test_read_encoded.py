"""Reading stored messages as their transport's bytes (`read_encoded`), the way
the Spark source's sequence-range reads get them: no kernel `Message` is built
for a message stored with bytes of the asked encoding."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import AddDestination, AddMessage, PersistenceAdapter

from .conftest import Opener

A = "queue://A"
WIRE = "test-wire"


def wire(n: int) -> bytes:
    return f"<wire {n}>".encode() + bytes(range(256)) * 3


def stored(n: int) -> Message:
    """Every third message came without transport bytes; the others carry them,
    with the fields a record may hold before them (properties, annotations,
    scheduling, another message's encoding)."""
    m = Message(f"body {n}".encode(), destination=Destination.parse(A), message_id=f"ID:{n}",
                durable=True, timestamp=1_700_000_000_000 + n, correlation_id="c",
                properties={"i": n, "b": b"\x00\x01"} if n % 2 else None,
                annotations={"x-opt-a": n} if n % 4 == 1 else None)
    if n % 3:
        m.encoded = wire(n)
        m.encoding = WIRE if n % 5 else "another-wire"
    if n == 4:
        m.scheduled_delay = 1000
    return m


async def test_stored_bytes_come_as_they_are_and_other_messages_decoded(
        open_store: Opener) -> None:
    store = await open_store()
    await store.write([AddDestination(A)])
    for n in range(1, 31):
        await store.write([AddMessage(A, n, stored(n))])
    got = await store.read_encoded(A, 0, None, WIRE)
    assert [seq for seq, _, _ in got] == list(range(1, 31))
    assert [stamp for _, stamp, _ in got] == [1_700_000_000_000 + n for n in range(1, 31)]
    for n, (_, _, data) in enumerate(got, 1):
        if n % 3 and n % 5:
            assert data == wire(n), n  # the bytes as stored, nothing else
        else:  # no bytes, or bytes of another encoding: the message itself
            assert isinstance(data, Message) and data.body == f"body {n}".encode(), n
            assert data.properties == ({"i": n, "b": b"\x00\x01"} if n % 2 else {})
    # paging as `read` does
    assert [s for s, _, _ in await store.read_encoded(A, 10, 5, WIRE)] == [11, 12, 13, 14, 15]
    assert await store.read_encoded(A, 30, None, WIRE) == []
    assert await store.read_encoded("queue://NONE", 0, None, WIRE) == []
    # the generic path (through `read`) gives the same
    generic = await PersistenceAdapter.read_encoded(store, A, 0, None, WIRE)
    assert [(s, t, d if isinstance(d, bytes) else d.message_id) for s, t, d in generic] == \
        [(s, t, d if isinstance(d, bytes) else d.message_id) for s, t, d in got]


async def test_a_corrupt_record_is_reported_and_left_out(
        open_store: Opener, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = await open_store()
    await store.write([AddDestination(A)])
    for n in range(1, 11):
        await store.write([AddMessage(A, n, stored(n))])
    f, off, _ln = store.index.location(A, 7)  # type: ignore[misc]
    await store.stop()
    path = tmp_path / "kahadb" / f"db-{f}.log"
    with open(path, "r+b") as fh:  # a bit flipped inside message 7's wire bytes
        fh.seek(off + 100)
        b = fh.read(1)
        fh.seek(off + 100)
        fh.write(bytes([b[0] ^ 0xFF]))
    store = await open_store()
    caplog.set_level(logging.ERROR, "relaymq.kahadb")
    got = await store.read_encoded(A, 0, None, WIRE)
    assert [s for s, _, _ in got] == [n for n in range(1, 11) if n != 7]
    assert "queue://A seq 7" in caplog.text and "unreadable" in caplog.text
    assert (await store.stats(A)).count == 9
