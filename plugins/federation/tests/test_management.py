"""What management shows of a federation: its peer's node id and the receivers
attached now, in the broker connection's per-operation status."""

from __future__ import annotations

from typing import Any

from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.model.destination import Destination
from relaymq.outgoing.node import node_id
from relaymq.testing import running_broker, wait_until_async


def _federation(broker: Broker) -> dict[str, Any]:
    (conn,) = broker.management.broker_connections()
    ops = conn.detail.get("operations", [])
    return next((op for op in ops if op.get("element") == "federation"), {})


async def test_management_shows_the_federation_and_its_receivers() -> None:
    async with running_broker(None, "amqp://127.0.0.1:0", broker_name="hub") as hub:
        port = hub.connector_address("amqp").rpartition(":")[2]
        edge = Broker(load_config_text(f"""<broker brokerName="edge" persistent="false">
  <broker-connections><amqp-connection uri="tcp://127.0.0.1:{port}" name="to-hub" retry-interval="200">
    <federation><local-address-policy name="news"><include address-match="news.#"/></local-address-policy>
      <property key="addressReceiverIdleTimeout" value="200"/></federation>
  </amqp-connection></broker-connections></broker>""", "xml"), strict=True)
        await edge.start()
        try:
            await wait_until_async(lambda: _federation(edge).get("remote") == node_id(hub),
                                   "the federation to know the hub's node id")
            assert _federation(edge)["federation"] == "to-hub"
            assert _federation(edge)["address_receivers"] == []
            kconn = await edge.connect()
            consumer = await kconn.subscribe(Destination.topic("news.eu"), on_message=lambda d: None)
            await wait_until_async(lambda: _federation(edge)["address_receivers"] == ["news.eu"],
                                   "an address receiver for news.eu")
            kconn.close_consumer(consumer)
            await wait_until_async(lambda: _federation(edge)["address_receivers"] == [],
                                   "the receiver gone after the idle timeout")
        finally:
            await edge.stop()
