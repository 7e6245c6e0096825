"""What survives a protocol change through a bridge (docs/bridge.md, "Messages
across protocols"): an AMQP source bridged to a STOMP target and a STOMP source
bridged to an AMQP target, every message header field and typed properties; and
ACTIVEMQ_BRIDGE_MSG_ID_LIST as a chain over two bridges."""

from __future__ import annotations

import time
from typing import Any

import pytest
from bridge_helpers import Drain, until
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.model.destination import Destination
from relaymq.model.message import BodyType, Message
from relaymq.outgoing import OutgoingConnections
from relaymq.testing import running_broker


def url(broker: Broker, scheme: str) -> str:
    return f"{scheme}://{broker.connector_address(scheme)}"


async def host_with(bridges: str) -> Broker:
    broker = Broker(load_config_text(f"""<broker persistent="false" brokerName="host">
  {bridges}
</broker>""", "xml"), strict=True)
    await broker.start()
    return broker


def full_message(expires: int) -> Message:
    return Message(
        b"caf\xc3\xa9 body", destination=Destination.queue("src"), body_type=BodyType.TEXT,
        message_id="ID:mapping-1", durable=True, priority=7, expiration=expires,
        correlation_id="corr-1", reply_to=Destination.queue("replies"), type="order",
        group_id="g1", group_seq=3, content_type="text/plain",
        properties={"s": "x y", "i": 42, "f": 1.5, "b": True})


async def send(uri: str, message: Message) -> None:
    conn = await OutgoingConnections().connect(uri)
    try:
        sender = await (await conn.session()).open_sender("queue://src")
        assert (await sender.send(message)).accepted
    finally:
        await conn.close()


@pytest.mark.parametrize("source_scheme,target_scheme",
                         [("amqp", "stomp"), ("stomp", "amqp"), ("stomp", "stomp")])
async def test_fields_and_properties_survive_a_protocol_change(source_scheme: str,
                                                                target_scheme: str) -> None:
    async with running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as source, \
            running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as target:
        host = await host_with(f"""<bridges>
  <bridge name="map" source-uri="{url(source, source_scheme)}" source-destination="queue://src"
          target-uri="{url(target, target_scheme)}" target-destination="queue://dst"
          failure-retry-interval="100"/>
</bridges>""")
        drain = Drain()
        try:
            expires = int(time.time() * 1000) + 3_600_000
            # into the source over the protocol the bridge reads with, so that one of
            # the bridge's two legs is AMQP and the other STOMP
            await send(url(source, "amqp"), full_message(expires))
            await drain.start(url(target, "amqp"), "queue://dst")
            await until(lambda: len(drain.deliveries) == 1, what="the bridged message")
            m = drain.deliveries[0].message
            assert bytes(m.body).decode() == "café body"
            assert m.durable and m.priority == 7 and m.expiration == expires
            assert m.correlation_id == "corr-1" and m.type == "order"
            assert m.reply_to == Destination.queue("replies")
            # JMSXGroupID / JMSXGroupSeq: AMQP group-id / group-sequence, STOMP headers
            assert (m.group_id, m.group_seq) == ("g1", 3)
            props: dict[str, Any] = dict(m.properties)
            # typed properties cross STOMP as strings (documented)
            assert {k: str(props[k]) for k in ("s", "i", "f")} == {"s": "x y", "i": "42",
                                                                   "f": "1.5"}
            assert str(props["b"]).lower() == "true"
        finally:
            await drain.close()
            await host.stop()


async def test_the_message_id_list_is_a_chain_over_two_bridges() -> None:
    async with running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as a, \
            running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as b, \
            running_broker(None, "amqp://127.0.0.1:0") as c:
        host = await host_with(f"""<bridges>
  <bridge name="ab" source-uri="{url(a, 'amqp')}" source-destination="queue://src"
          target-uri="{url(b, 'stomp')}" target-destination="queue://mid"
          add-message-id-in-header="true" failure-retry-interval="100"/>
  <bridge name="bc" source-uri="{url(b, 'amqp')}" source-destination="queue://mid"
          target-uri="{url(c, 'amqp')}" target-destination="queue://dst"
          add-message-id-in-header="true" failure-retry-interval="100"/>
</bridges>""")
        drain = Drain()
        try:
            await send(url(a, "amqp"), full_message(0))
            await drain.start(url(c, "amqp"), "queue://dst")
            await until(lambda: len(drain.deliveries) == 1, what="the message through both")
            chain = str(drain.deliveries[0].message.properties["ACTIVEMQ_BRIDGE_MSG_ID_LIST"])
            ids = chain.split(",")
            # the first hop's id, then the id the middle broker gave it (STOMP: a new one)
            assert len(ids) == 2 and ids[0] == "ID:mapping-1", chain
            assert ids[1].startswith("ID:") and ids[1] != ids[0], chain
        finally:
            await drain.close()
            await host.stop()


@pytest.mark.parametrize("target_scheme", ["amqp", "stomp"])
async def test_message_group_from_a_stomp_producer_through_a_stomp_source(target_scheme: str) -> None:
    """A group set on a STOMP SEND (`JMSXGroupID`/`JMSXGroupSeq` headers) is on the
    MESSAGE frames the bridge reads, and reaches the target's consumers."""
    async with running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as source, \
            running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as target:
        host = await host_with(f"""<bridges>
  <bridge name="groups" source-uri="{url(source, 'stomp')}" source-destination="/queue/src"
          target-uri="{url(target, target_scheme)}" target-destination="queue://dst"
          max-batch-size="3" max-batch-time="50" failure-retry-interval="100"/>
</bridges>""")
        drain = Drain()
        try:
            conn = await OutgoingConnections().connect(url(source, "stomp"))
            try:
                sender = await (await conn.session()).open_sender("/queue/src")
                for seq in (1, 2):
                    m = Message(f"g-{seq}".encode(), destination=Destination.queue("src"),
                                durable=True, group_id="orders-42", group_seq=seq)
                    assert (await sender.send(m)).accepted
                plain = Message(b"no-group", destination=Destination.queue("src"), durable=True)
                assert (await sender.send(plain)).accepted
            finally:
                await conn.close()
            await drain.start(url(target, "amqp"), "queue://dst")
            await until(lambda: len(drain.deliveries) == 3, what="the three bridged messages")
            got = {bytes(d.message.body).decode(): (d.message.group_id, d.message.group_seq)
                   for d in drain.deliveries}
            assert got == {"g-1": ("orders-42", 1), "g-2": ("orders-42", 2), "no-group": (None, 0)}
        finally:
            await drain.close()
            await host.stop()
