"""A message whose fixed-width field the stored record cannot keep (a 64-bit
field out of range) is refused alone by the broker's store writer: the other
sends of the same store write (another producer's, in the same loop turn)
are stored. The transports refuse such values when they arrive; this is the
kernel's guard for any other path (the embedded client here)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from relaymq.client import connect_broker
from relaymq.errors import MessageFormatError
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.testing import broker_config, plugin_element, running_broker

GOOD = 300


def cfg(tmp_path: Path):  # type: ignore[no-untyped-def]
    c = broker_config(persistent=True, data_directory=str(tmp_path))
    c.persistence_adapter = plugin_element("kahaDB")
    return c


def message(body: str) -> Message:
    return Message(body.encode(), destination=Destination.queue("Q"), durable=True)


@pytest.mark.parametrize("field", ["expiration", "group_seq", "scheduled_delay"])
async def test_an_unstorable_send_fails_alone_in_a_shared_write(tmp_path: Path, field: str) -> None:
    async with running_broker(cfg(tmp_path)) as broker:
        good = await connect_broker(broker)
        bad = await connect_broker(broker)
        # Sent in one loop turn, so the store writer makes one write of them all.
        # (The kernel's submit returns the future of the store write, which a
        # transport awaits before its receipt.)
        sends = [good.kernel.submit(message(f"good-{i}")) for i in range(GOOD)]
        bad_msg = message("bad")
        setattr(bad_msg, field, 1 << 64)
        stored = await asyncio.gather(*sends[:150], bad.kernel.submit(bad_msg), *sends[150:])
        results = await asyncio.gather(*stored, return_exceptions=True)
        refused = results[150]
        assert isinstance(refused, MessageFormatError), refused
        assert field in str(refused)
        assert [r for r in results if isinstance(r, BaseException)] == [refused]
        # the refusing connection still sends
        await bad.send("queue://Q", "after", persistent=True)
        got = await good.consumer("queue://Q")
        bodies = []
        for _ in range(GOOD + 1):
            m = await got.receive(timeout=10)
            assert m is not None
            bodies.append(m.body)
        assert sorted(bodies) == sorted([f"good-{i}".encode() for i in range(GOOD)] + [b"after"])
        await good.close()
        await bad.close()
