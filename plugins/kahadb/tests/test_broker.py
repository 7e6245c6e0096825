"""The kernel's broker on kahaDB: persistent messages survive a broker restart."""

from __future__ import annotations

from pathlib import Path

from relaymq.client import connect_broker
from relaymq.testing import broker_config, plugin_element, running_broker
from relaymq_kahadb import KahaDBPersistenceAdapter


def cfg(tmp_path: Path):  # type: ignore[no-untyped-def]
    c = broker_config(persistent=True, data_directory=str(tmp_path))
    c.persistence_adapter = plugin_element("kahaDB", journalMaxFileLength="256kb")
    return c


async def test_queue_and_durable_subscription_survive_a_restart(tmp_path: Path) -> None:
    async with running_broker(cfg(tmp_path)) as broker:
        assert isinstance(broker.store, KahaDBPersistenceAdapter)
        assert broker.store.directory == tmp_path / "kahadb"
        conn = await connect_broker(broker, client_id="c1")
        sub = await conn.consumer("topic://T", durable_name="d1")
        await sub.close()
        for i in range(300):
            await conn.send("queue://Q", f"q{i}".encode() * 100, persistent=True)
        for i in range(5):
            await conn.send("topic://T", f"t{i}", persistent=True)
        got = await conn.consumer("queue://Q", ack_mode="client")
        first = [await got.receive(timeout=5) for _ in range(100)]
        for m in first:
            assert m is not None
            m.ack()
        await got.close()
        await conn.close()
    async with running_broker(cfg(tmp_path)) as broker:
        conn = await connect_broker(broker, client_id="c1")
        got = await conn.consumer("queue://Q")
        bodies = []
        for _ in range(200):
            m = await got.receive(timeout=5)
            assert m is not None
            bodies.append(m.body)
        assert bodies == [f"q{i}".encode() * 100 for i in range(100, 300)]
        sub = await conn.consumer("topic://T", durable_name="d1")
        texts = [(await sub.receive(timeout=5)).body for _ in range(5)]  # type: ignore[union-attr]
        assert texts == [f"t{i}".encode() for i in range(5)]
        await conn.close()
