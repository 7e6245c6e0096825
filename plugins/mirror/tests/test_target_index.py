"""A mirror target's index of where messages are (by internal id) sees every
message stored, including one a client handed over just before the index was
made: its send made no change-feed event (nobody listened), and it was not in
the queue or the store yet when the index read them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from relaymq.broker.broker import Broker
from relaymq.client import connect_broker
from relaymq.config.model import BrokerConfig, PluginElement
from relaymq.model.destination import Destination
from relaymq_mirror.state import target_index
from relaymq_mirror.wire import internal_id


async def test_a_send_under_way_when_the_index_is_made_is_found(tmp_path: Path) -> None:
    store = PluginElement("kahaDB", {"directory": str(tmp_path / "kahadb")})
    broker = Broker(BrokerConfig(persistent=True, persistence_adapter=store))
    await broker.start()
    try:
        conn = await connect_broker(broker)
        try:
            await conn.send("queue://q", "first", persistent=True, message_id="ID:first")
            writer = broker.region.writer
            sending = asyncio.ensure_future(
                conn.send("queue://q", "second", persistent=True, message_id="ID:second"))
            for _ in range(1000):  # until the send is handed to the store writer
                if writer.busy or sending.done():
                    break
                await asyncio.sleep(0)
            assert writer.busy and not sending.done(), "the send is being stored"
            queue = broker.region.queues[Destination.queue("q")]
            index = target_index(broker)  # made now: the send above made no event
            assert await index.find(queue, internal_id("ID:second")) is not None
            await sending
            assert await index.find(queue, internal_id("ID:first")) is not None
        finally:
            await conn.close()
    finally:
        await broker.stop()
