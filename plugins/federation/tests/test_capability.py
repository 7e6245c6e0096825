"""Local policies require the peer to offer the receiver capability on its
answer (``AMQ_FEDERATION_QUEUE_RECEIVER``), as Artemis does: without it the
receiver is closed, the kind is refused once (logged, shown by management) and
no further receiver of that kind is attached on the connection."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

import pytest
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.model.destination import Destination
from relaymq.testing import running_broker, wait_until_async
from relaymq_amqp import link_handlers
from relaymq_federation import wire
from relaymq_federation.target import ControlLink, QueueSender


class OldQueueSender(QueueSender):
    """A peer that serves queue receivers but offers another capability."""

    capability = "AMQ_FEDERATION_SOMETHING_ELSE"
    attached: ClassVar[list[str]] = []

    def attach(self) -> None:
        OldQueueSender.attached.append(self.link.name)
        super().attach()


class OldControlLink(ControlLink):
    """A peer that answers the control link without offering its capability."""

    attached: ClassVar[int] = 0

    def attach(self) -> None:
        OldControlLink.attached += 1
        self.link.open(target=self.link.remote_target, properties={wire.VERSION: 2}, credit=10)

    def on_delivery(self, delivery: Any) -> None:
        self.link.accept(delivery)

    def on_detach(self, closed: bool) -> None:
        pass


def _federation(broker: Broker) -> dict[str, Any]:
    (conn,) = broker.management.broker_connections()
    ops = conn.detail.get("operations", [])
    return next((op for op in ops if op.get("element") == "federation"), {})


async def test_local_queue_policy_is_refused_without_the_receiver_capability(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="relaymq.federation")
    OldQueueSender.attached.clear()
    async with running_broker(None, "amqp://127.0.0.1:0", broker_name="hub") as hub:
        link_handlers.register(hub, wire.QUEUE_RECEIVER, OldQueueSender)
        for q in ("work.1", "work.2"):
            await hub.management.create_queue(q)
        port = hub.connector_address("amqp").rpartition(":")[2]
        edge = Broker(load_config_text(f"""<broker brokerName="edge" persistent="false">
  <broker-connections><amqp-connection uri="tcp://127.0.0.1:{port}" name="to-hub" retry-interval="200">
    <federation><local-queue-policy name="work"><include queue-match="work.*"/></local-queue-policy>
    </federation>
  </amqp-connection></broker-connections></broker>""", "xml"), strict=True)
        await edge.start()
        try:
            await wait_until_async(lambda: _federation(edge).get("remote") is not None,
                                   "the federation to reach the hub")
            assert _federation(edge)["refused"] == {}
            kconn = await edge.connect()
            await kconn.subscribe(Destination.queue("work.1"), on_message=lambda d: None)
            await wait_until_async(lambda: _federation(edge)["refused"].get("queue"),
                                   "the queue receivers refused")
            assert _federation(edge)["refused"] == {
                "queue": f"the peer does not offer {wire.QUEUE_RECEIVER}"}
            assert len(OldQueueSender.attached) == 1
            # the hub saw its link closed: no federation consumer stays there
            await wait_until_async(lambda: hub.management.consumer_count("queue://work.1") == 0,
                                   "the refused receiver closed on the hub")
            # more demand attaches nothing more (a receiver would be attaching at once:
            # demand is counted when the consumer opens); the refusal is logged once
            await kconn.subscribe(Destination.queue("work.2"), on_message=lambda d: None)
            status = _federation(edge)
            assert status["queue_waiting"] == ["work.1", "work.2"]
            assert status["attaching"] == 0 and status["queue_receivers"] == []
            assert len(OldQueueSender.attached) == 1
            refusals = [r for r in caplog.records
                        if f"refused: the peer does not offer {wire.QUEUE_RECEIVER}" in r.getMessage()]
            assert len(refusals) == 1 and refusals[0].levelno == logging.WARNING
        finally:
            await edge.stop()


async def test_control_link_without_the_capability_is_refused_and_retried(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="relaymq.federation")
    OldControlLink.attached = 0
    async with running_broker(None, "amqp://127.0.0.1:0", broker_name="hub") as hub:
        link_handlers.register(hub, wire.CONTROL_LINK, OldControlLink)
        await hub.management.create_queue("work.1")
        port = hub.connector_address("amqp").rpartition(":")[2]
        edge = Broker(load_config_text(f"""<broker brokerName="edge" persistent="false">
  <broker-connections><amqp-connection uri="tcp://127.0.0.1:{port}" name="to-hub" retry-interval="100">
    <federation><local-queue-policy name="work"><include queue-match="work.*"/></local-queue-policy>
    </federation>
  </amqp-connection></broker-connections></broker>""", "xml"), strict=True)
        await edge.start()
        try:
            kconn = await edge.connect()
            await kconn.subscribe(Destination.queue("work.1"), on_message=lambda d: None)
            reason = f"the peer does not offer {wire.CONTROL_LINK} on the control link"
            await wait_until_async(lambda: OldControlLink.attached >= 3, "attempts again")
            assert _federation(edge)["control"] == f"refused: {reason}"
            # no receiver was ever attached on the hub, the refusal is logged once
            assert hub.management.consumer_count("queue://work.1") == 0
            assert _federation(edge)["queue_waiting"] == ["work.1"]
            assert sum(reason in r.getMessage() for r in caplog.records) == 1
        finally:
            await edge.stop()
