"""A backlog of persistent messages larger than the queue's window stays on disk.

The queue keeps `storeCursorMemoryLimit` bytes of stored messages in memory
(and `cursorMemoryHighWaterMark` percent of its memory limit at most); the rest
are read back from the journal, in order, as consumers make room.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from relaymq.client import connect_broker
from relaymq.config import load_config_text
from relaymq.model.destination import Destination
from relaymq.testing import running_broker
from relaymq.testing.barriers import before_marker
from relaymq.testing.waits import wait_until_async

BODY = 1024


def xml(tmp_path: Path, policy: str) -> str:
    return f"""
    <broker brokerName="paging" dataDirectory="{tmp_path}">
      <destinationPolicy><policyMap><policyEntries>
        {policy}
      </policyEntries></policyMap></destinationPolicy>
      <persistenceAdapter><kahaDB directory="{tmp_path}/kahadb" journalMaxFileLength="1mb"/></persistenceAdapter>
    </broker>"""


def body(i: int) -> bytes:
    return f"{i:08d}".encode() * (BODY // 8)


@pytest.mark.slow  # a long run or a restart: compiled build only (docs/testing.md)
async def test_a_backlog_beyond_the_window_is_read_back_from_the_journal(tmp_path: Path) -> None:
    config = load_config_text(xml(tmp_path, '<policyEntry queue=">" storeCursorMemoryLimit="64kb"/>'),
                              "xml")
    count = 3000  # about 3 MB of messages against a 64 KiB window
    async with running_broker(config) as broker:
        conn = await connect_broker(broker)
        for i in range(count):
            await conn.send("queue://BACKLOG", body(i), persistent=True)
        queue = await broker.region.queue(Destination.parse("queue://BACKLOG"))
        assert queue.stats.pending == count
        held = queue.stats.memory_used
        assert 0 < held <= 64 * 1024 + 2 * BODY, held
        consumer = await conn.consumer("queue://BACKLOG", ack_mode="client", prefetch=50)
        got = []
        for _ in range(count):
            m = await consumer.receive(timeout=5)
            assert m is not None
            got.append(m.body)
            m.ack()
            assert queue.stats.memory_used <= 64 * 1024 + 52 * BODY
        assert got == [body(i) for i in range(count)]
        assert await before_marker(conn, "queue://BACKLOG", consumer, ack=True) == []
        await conn.close()


async def test_the_window_is_a_share_of_the_destination_memory_limit(tmp_path: Path) -> None:
    policy = '<policyEntry queue=">" memoryLimit="100kb" cursorMemoryHighWaterMark="50"/>'
    config = load_config_text(xml(tmp_path, policy), "xml")
    async with running_broker(config) as broker:
        conn = await connect_broker(broker)
        for i in range(500):
            await conn.send("queue://HALF", body(i), persistent=True)
        queue = await broker.region.queue(Destination.parse("queue://HALF"))
        assert queue.stats.pending == 500
        assert queue.stats.memory_used <= 50 * 1024 + 2 * BODY
        consumer = await conn.consumer("queue://HALF")
        bodies = [(await consumer.receive(timeout=5)).body for _ in range(500)]  # type: ignore[union-attr]
        assert bodies == [body(i) for i in range(500)]
        await conn.close()



async def test_a_non_persistent_message_during_paging_does_not_hide_the_stored_backlog(
        tmp_path: Path) -> None:
    config = load_config_text(xml(tmp_path, '<policyEntry queue=">" storeCursorMemoryLimit="16kb"/>'),
                              "xml")
    count = 400
    async with running_broker(config) as broker:
        conn = await connect_broker(broker)
        for i in range(count):
            await conn.send("queue://MIXED", body(i), persistent=True)
        await conn.send("queue://MIXED", b"transient", persistent=False)  # while paging
        for i in range(count, count + 10):
            await conn.send("queue://MIXED", body(i), persistent=True)
        consumer = await conn.consumer("queue://MIXED", ack_mode="client", prefetch=20)
        # everything before a (persistent, so paged like them) marker sent behind them:
        # a copy delivered twice counts
        got = await before_marker(conn, "queue://MIXED", consumer, ack=True, persistent=True)
        persistent = [b for b in got if b != "transient"]
        assert persistent == [body(i).decode() for i in range(count + 10)]
        assert got.count("transient") == 1
        await conn.close()


async def test_a_message_stored_while_a_page_is_being_read_is_not_left_behind(
        tmp_path: Path) -> None:
    """A page-in takes the store's view of the backlog, then decodes it on a
    thread. A message stored meanwhile stays on disk (the queue is paging), and is
    not in that view; the page-in must not then declare the backlog read."""
    config = load_config_text(xml(tmp_path, '<policyEntry queue=">" storeCursorMemoryLimit="16kb"/>'),
                              "xml")
    loop = asyncio.get_running_loop()
    # the loop's default executor does the store's reads: one thread, held below
    pool = ThreadPoolExecutor(1, thread_name_prefix="paging-test")
    loop.set_default_executor(pool)
    async with running_broker(config) as broker:
        conn = await connect_broker(broker)
        for i in range(20):  # 14 in memory (the 16 KiB window), 6 on disk
            await conn.send("queue://RACE", body(i), persistent=True)
        queue = await broker.region.queue(Destination.parse("queue://RACE"))
        in_memory = len(queue.pending)
        assert 0 < in_memory < 20
        gate = threading.Event()
        held = loop.run_in_executor(None, gate.wait)  # the next read waits behind this
        try:
            consumer = await conn.consumer("queue://RACE", ack_mode="client", prefetch=100)
            first = [await consumer.receive(timeout=5) for _ in range(in_memory)]
            assert all(m is not None for m in first)
            for m in first:
                m.ack()  # room for the whole rest of the backlog
            await wait_until_async(lambda: pool._work_queue.qsize() > 0,
                                   "the page-in's read to wait behind the held thread")
            await conn.send("queue://RACE", body(20), persistent=True)  # stored while the read waits
        finally:
            gate.set()
        await held
        got = [m.body for m in first] + [b.encode() for b in await before_marker(
            conn, "queue://RACE", consumer, ack=True, persistent=True)]
        assert got == [body(i) for i in range(21)]
        await conn.close()
