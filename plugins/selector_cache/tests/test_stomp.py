"""End to end through stomp.py: a STOMP consumer's selector is remembered with its
string conversion, so it gets what it would have selected while it was away."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.config.loader import load_config_text
from relaymq.model.destination import Destination

stomp = pytest.importorskip("stomp")
pytest.importorskip("relaymq_stomp")
pytest.importorskip("relaymq_virtual_topic")

XML = """<broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
  <destinationInterceptors><virtualDestinationInterceptor><virtualDestinations>
    <virtualTopic name="VirtualTopic.>" prefix="Consumer.*." selectorAware="true"/>
  </virtualDestinations></virtualDestinationInterceptor></destinationInterceptors>
  <plugins><virtualSelectorCacheBrokerPlugin persistFile="{path}"/></plugins>
  <transportConnectors><transportConnector uri="stomp://127.0.0.1:0"/></transportConnectors>
</broker>"""


class Inbox(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.bodies: list[str] = []
        self.receipts: set[str] = set()

    def on_message(self, frame: Any) -> None:
        with self.cond:
            self.bodies.append(frame.body)
            self.cond.notify_all()

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.receipts.add(frame.headers["receipt-id"])
            self.cond.notify_all()

    def wait(self, pred: Any, timeout: float = 5.0) -> bool:
        with self.cond:
            return self.cond.wait_for(pred, timeout)


def test_stomp_consumer_reconnects_and_gets_what_its_selector_wants(tmp_path):
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(30)

    config = load_config_text(XML.format(path=tmp_path / "selectorcache.json"), strict=True)
    broker = Broker(config, strict=True)
    run(broker.start())
    host, _, port = broker.connector_address("stomp").rpartition(":")

    def client() -> tuple[Any, Inbox]:
        conn = stomp.Connection12([(host, int(port))], heartbeats=(0, 0),
                                  reconnect_attempts_max=1)
        inbox = Inbox()
        conn.set_listener("inbox", inbox)
        conn.connect(wait=True)
        return conn, inbox

    try:
        consumer, inbox = client()
        consumer.subscribe("/queue/Consumer.A.VirtualTopic.Prices", "s", ack="auto",
                           headers={"selector": "price > 5.0", "receipt": "sub"})
        assert inbox.wait(lambda: "sub" in inbox.receipts)
        consumer.disconnect()

        producer, _ = client()
        for price in ("10", "1", "7.5"):  # STOMP headers are strings; 5.0 parses them as doubles
            producer.send("/topic/VirtualTopic.Prices", f"price {price}",
                          headers={"price": price})
        producer.disconnect()

        back, inbox = client()
        back.subscribe("/queue/Consumer.A.VirtualTopic.Prices", "s", ack="auto",
                       headers={"selector": "price > 5.0"})
        assert inbox.wait(lambda: len(inbox.bodies) >= 2)
        assert inbox.bodies == ["price 10", "price 7.5"]
        assert run(_enqueued(broker, "Consumer.A.VirtualTopic.Prices")) == 2  # never "price 1"
        back.disconnect()
    finally:
        run(broker.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    assert '"stringConversion": true' in (tmp_path / "selectorcache.json").read_text()


async def _enqueued(broker: Broker, name: str) -> int:
    return broker.region.queues[Destination.queue(name)].stats.enqueued
