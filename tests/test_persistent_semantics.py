"""Kernel semantics that need a persistent store, run on the kahaDB journal."""

from __future__ import annotations

import pytest
from relaymq.broker.broker import Broker
from relaymq.client import connect_broker
from relaymq.config.model import BrokerConfig, PluginElement, SystemUsageConfig, UsageLimit
from relaymq.model.destination import Destination
from relaymq.testing.barriers import before_marker

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")


def kahadb_config(directory: str, sync: str = "always", **fields) -> BrokerConfig:
    return BrokerConfig(
        persistent=True,
        persistence_adapter=PluginElement(
            "kahaDB", {"directory": directory, "journalDiskSyncStrategy": sync}),
        **fields,
    )


async def started(cfg: BrokerConfig) -> Broker:
    b = Broker(cfg)
    await b.start()
    return b


async def test_durable_subscription_survives_restart(tmp_path):
    cfg = kahadb_config(str(tmp_path / "kahadb"))
    b = await started(cfg)
    sub = await connect_broker(b, client_id="audit-app")
    c = await sub.consumer("topic://ORDERS", durable_name="audit", selector="amount > 100")
    await sub.close()
    pub = await connect_broker(b)
    await pub.send("topic://ORDERS", "big", persistent=True, properties={"amount": 500})
    await pub.send("topic://ORDERS", "small", persistent=True, properties={"amount": 5})
    await pub.send("topic://ORDERS", "big-np", persistent=False, properties={"amount": 900})
    await b.stop()

    b2 = await started(kahadb_config(str(tmp_path / "kahadb")))
    try:
        again = await connect_broker(b2, client_id="audit-app")
        c = await again.consumer("topic://ORDERS", durable_name="audit", selector="amount > 100")
        got = await before_marker(again, "topic://ORDERS", c, properties={"amount": 1000})
        assert got == ["big"], "persistent, matching messages survive"
        await again.close()
        # and the subscription itself is still there, collecting while offline
        pub = await connect_broker(b2)
        await pub.send("topic://ORDERS", "later", persistent=True, properties={"amount": 101})
        back = await connect_broker(b2, client_id="audit-app")
        c = await back.consumer("topic://ORDERS", durable_name="audit", selector="amount > 100")
        assert await before_marker(pub, "topic://ORDERS", c, properties={"amount": 1000}) == [
            "later"]
        await c.close()
        await back.unsubscribe("audit")
    finally:
        await b2.stop()
    b3 = await started(kahadb_config(str(tmp_path / "kahadb")))
    try:
        assert not b3.region.subscriptions, "an unsubscribed subscription stays gone"
    finally:
        await b3.stop()


async def test_queue_messages_ids_and_sequences_survive_restart(tmp_path):
    b = await started(kahadb_config(str(tmp_path / "k")))
    p = await connect_broker(b)
    ids = [(await p.send("queue://JOBS", f"{i}", persistent=True)).message_id for i in range(5)]
    c = await p.consumer("queue://JOBS", ack_mode="individual")
    first = await c.receive(1)
    first.ack()
    last_seq = b.region.queues[Destination.queue("JOBS")].last_seq
    await b.stop()

    b2 = await started(kahadb_config(str(tmp_path / "k")))
    try:
        q = b2.region.queues[Destination.queue("JOBS")]
        assert q.last_seq == last_seq
        p2 = await connect_broker(b2)
        await p2.send("queue://JOBS", "new", persistent=True)
        assert q.last_seq == last_seq + 1, "sequence numbers never repeat across restarts"
        c2 = await p2.consumer("queue://JOBS")
        got = [await c2.receive(10) for _ in range(5)]
        assert [m.text if m else None for m in got] == ["1", "2", "3", "4", "new"]
        assert [m.message_id for m in got[:4]] == ids[1:]
        assert await before_marker(p2, "queue://JOBS", c2) == []  # and nothing else
    finally:
        await b2.stop()


@pytest.mark.slow
async def test_backlog_beyond_memory_is_paged_from_the_store(tmp_path):
    limit = 2 << 20
    cfg = kahadb_config(str(tmp_path / "k"), sync="never",
                        system_usage=SystemUsageConfig(memory=UsageLimit(limit=limit)))
    b = await started(cfg)
    try:
        p = await connect_broker(b)
        n = 10_000
        body = b"p" * 1024
        for i in range(n):
            await p.send("queue://BACKLOG", body + str(i).encode(), persistent=True)
        assert b.queue_size("BACKLOG") == n
        assert b.usage.memory.used <= limit, "the backlog is not all in memory"
        c = await p.consumer("queue://BACKLOG", prefetch=100)
        seen = 0
        while (m := await c.receive(2)) is not None:
            assert m.body == body + str(seen).encode(), "FIFO across pages"
            seen += 1
            if seen == n:
                break
        assert seen == n
        assert b.usage.memory.used <= limit
    finally:
        await b.stop()


async def test_pipelined_submits_keep_order_and_share_store_writes(tmp_path):
    import asyncio

    from relaymq.broker.security import ConnectRequest
    from relaymq.model.message import Message

    b = await started(kahadb_config(str(tmp_path / "k")))
    try:
        conn = await b.connect(ConnectRequest())
        dest = Destination.queue("PIPE")
        stored = [await conn.submit(Message(f"{i}".encode(), destination=dest, durable=True))
                  for i in range(300)]
        assert all(s is not None for s in stored)
        assert b.queue_size("PIPE") == 0, "nothing is visible before the store has it"
        await asyncio.gather(*stored)
        assert b.queue_size("PIPE") == 300
        reader = await connect_broker(b)
        c = await reader.consumer("queue://PIPE")
        assert await before_marker(reader, "queue://PIPE", c) == [str(i) for i in range(300)]
        assert (await b.store.stats("queue://PIPE")).last_seq == 300
    finally:
        await b.stop()
