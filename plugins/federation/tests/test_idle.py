"""A receiver whose demand went holds no credit while it waits for the idle
timeout (Artemis drains it): messages that reach the remote queue meanwhile
stay there for its own consumers instead of being pulled to a broker where
nobody consumes."""

from __future__ import annotations

import asyncio
from typing import Any

from fedtools import client, receive_all, send
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.model.destination import Destination
from relaymq.testing import running_broker, wait_until_async

WORK = Destination.queue("work.1")


def _federation(broker: Broker) -> dict[str, Any]:
    (conn,) = broker.management.broker_connections()
    ops = conn.detail.get("operations", [])
    return next((op for op in ops if op.get("element") == "federation"), {})


def _federation_consumers(hub: Broker) -> list[Any]:
    return [c for conn in list(hub.connections) for c in conn.consumers.values()
            if c.network and c.destination == WORK and not c.closed]


async def test_a_receiver_without_demand_is_drained_until_it_is_detached() -> None:
    async with running_broker(None, "amqp://127.0.0.1:0", broker_name="hub") as hub:
        await hub.management.create_queue("work.1")
        url = hub.connector_address("amqp")
        port = url.rpartition(":")[2]
        edge = Broker(load_config_text(f"""<broker brokerName="edge" persistent="false">
  <broker-connections><amqp-connection uri="tcp://127.0.0.1:{port}" name="to-hub" retry-interval="200">
    <federation><local-queue-policy name="work"><include queue-match="work.*"/></local-queue-policy>
      <property key="queueReceiverIdleTimeout" value="60000"/></federation>
  </amqp-connection></broker-connections></broker>""", "xml"), strict=True)
        await edge.start()
        try:
            kconn = await edge.connect()
            got: list[Any] = []
            holder: dict[str, Any] = {}

            def on_message(delivery: Any) -> None:
                got.append(delivery.message)
                ack = holder["c"].ack(delivery.id)
                if ack is not None:
                    asyncio.ensure_future(ack)

            holder["c"] = await kconn.subscribe(WORK, on_message=on_message)
            await wait_until_async(lambda: [c for c in _federation_consumers(hub) if c.credit > 0],
                                   "the edge's receiver with credit on the hub")
            await asyncio.to_thread(send, url, "queue://work.1", ["w1"])
            await wait_until_async(lambda: len(got) == 1, "w1 pulled to the edge")
            kconn.close_consumer(holder["c"])
            # still attached (the idle timeout is a minute), but drained to no credit
            await wait_until_async(lambda: [c.credit for c in _federation_consumers(hub)] == [0],
                                   "the receiver drained")
            assert _federation(edge)["queue_receivers"] == ["work.1"]

            def hub_gets_it() -> list[str]:
                send(url, "queue://work.1", ["later"])
                with client(url) as c:
                    return receive_all(c.create_receiver("queue://work.1", credit=5), 1)

            assert await asyncio.to_thread(hub_gets_it) == ["later"]
            assert _federation(edge)["received"] == 1
        finally:
            await edge.stop()
