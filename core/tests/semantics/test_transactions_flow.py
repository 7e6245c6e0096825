"""Local transactions, usage limits and flow control."""

from __future__ import annotations

import asyncio

import pytest
from relaymq.config.model import BrokerConfig, SystemUsageConfig, UsageLimit
from relaymq.errors import ResourceLimitExceeded
from relaymq.testing import wait_until_async
from relaymq.testing.barriers import before_marker

from .conftest import policy


async def test_transacted_sends_visible_only_after_commit(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    outside = await connect(b)
    c = await outside.consumer("queue://TX")
    async with p.transaction():
        await p.send("queue://TX", "a")
        await p.send("queue://TX", "b")
        assert await before_marker(outside, "queue://TX", c) == []
    assert await before_marker(p, "queue://TX", c) == ["a", "b"]


async def test_rolled_back_sends_are_discarded(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    p.begin()
    await p.send("queue://TXR", "never")
    p.rollback()
    await p.send("queue://TXR", "kept")
    c = await p.consumer("queue://TXR")
    assert await before_marker(p, "queue://TXR", c) == ["kept"]


async def test_rolled_back_acks_make_messages_redeliverable(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    for i in range(3):
        await p.send("queue://TXA", f"{i}")
    cons_conn = await connect(b)
    c = await cons_conn.consumer("queue://TXA", ack_mode="individual")
    cons_conn.begin()
    msgs = [await c.receive(5) for _ in range(3)]
    for m in msgs:
        m.ack()
    cons_conn.rollback()
    again = [await c.receive(5) for _ in range(3)]
    assert [(m.text, m.redelivered) for m in again] == [("0", True), ("1", True), ("2", True)]
    cons_conn.begin()
    for m in again:
        m.ack()
    await cons_conn.commit()
    assert b.queue_size("TXA") == 0


async def test_transaction_commits_sends_and_acks_together(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("queue://IN", "work")
    worker = await connect(b)
    c = await worker.consumer("queue://IN", ack_mode="individual")
    async with worker.transaction():
        m = await c.receive(10)
        await worker.send("queue://OUT", m.text.upper())
        m.ack()
    assert b.queue_size("IN") == 0 and b.queue_size("OUT") == 1


def _usage(limit: int, fail: bool = False, timeout: int = 0) -> SystemUsageConfig:
    return SystemUsageConfig(memory=UsageLimit(limit=limit), send_fail_if_no_space=fail,
                             send_fail_if_no_space_after_timeout=timeout)


async def test_producer_waits_while_memory_is_full(make_broker, connect):
    b = await make_broker(BrokerConfig(persistent=False, system_usage=_usage(20_000)))
    p = await connect(b)
    body = b"x" * 1000
    sent = 0

    async def produce():
        nonlocal sent
        for _ in range(100):
            await p.send("queue://FLOOD", body)
            sent += 1

    task = asyncio.create_task(produce())
    await wait_until_async(lambda: b.usage.memory.waiters or task.done(), "the producer held back")
    assert not task.done() and sent < 30, "the producer is held back"
    assert b.usage.memory.used <= 20_000 + 2000
    c = await (await connect(b)).consumer("queue://FLOOD")
    got = 0
    while got < 100:
        m = await c.receive(1)
        assert m is not None
        got += 1
    await asyncio.wait_for(task, 2)
    assert sent == 100


async def test_send_fail_if_no_space_refuses_with_clear_error(make_broker, connect):
    b = await make_broker(BrokerConfig(persistent=False, system_usage=_usage(5_000, fail=True)))
    p = await connect(b)
    with pytest.raises(ResourceLimitExceeded, match="sendFailIfNoSpace"):
        for _ in range(100):
            await p.send("queue://FULL", b"x" * 1000)
    assert 0 < b.queue_size("FULL") < 100  # accepted messages are kept
    c = await p.consumer("queue://FULL")
    accepted = b.destination_stats()["queue://FULL"]["enqueued"]
    got = [await c.receive(5) for _ in range(accepted)]
    assert None not in got and b.queue_size("FULL") == 0  # every accepted message, then none


async def test_send_fail_after_timeout(make_broker, connect):
    b = await make_broker(BrokerConfig(persistent=False, system_usage=_usage(3_000, fail=True, timeout=100)))
    p = await connect(b)
    with pytest.raises(ResourceLimitExceeded):
        for _ in range(10):
            await p.send("queue://SLOWFULL", b"x" * 1000)


async def test_per_destination_memory_limit(make_broker, connect):
    cfg = BrokerConfig(persistent=False, policy_entries=[policy(queue="SMALL", memory_limit=5_000)])
    b = await make_broker(cfg)
    p = await connect(b)
    task = asyncio.gather(*[p.send("queue://SMALL", b"y" * 1000) for _ in range(20)])
    queues = b.region.queues
    await wait_until_async(lambda: any(k.name == "SMALL" and q._space_waiters
                                       for k, q in queues.items()),
                           "producers waiting for room in SMALL")
    assert not task.done()
    assert b.queue_size("SMALL") < 20
    await p.send("queue://OTHER", b"z")  # other destinations are not blocked
    c = await (await connect(b)).consumer("queue://SMALL")
    got = [await c.receive(10) for _ in range(20)]  # the held producers get through
    await asyncio.wait_for(task, 20)
    assert None not in got
