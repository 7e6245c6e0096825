"""The Artemis side of a mirror link, played as the reference
(/work/shared/reference/artemis-broker-connections-wire.md) says Artemis does
it: control events and mirrored messages built with proton's codec, and the
sender link Artemis opens (with the outgoing AMQP client, since proton cannot
send link capabilities). Shared by the wire and target-delivery tests."""

from __future__ import annotations

import uuid
from typing import Any

from proton import Message, symbol
from relaymq_amqp.outgoing import AmqpConnection

ARTEMIS_NODE = str(uuid.uuid4())
SNF = "$ACTIVEMQ_ARTEMIS_MIRROR_relaymq"


def control(event: str, body: Any, **ann: Any) -> bytes:
    m = Message(body=body, durable=True)
    m.annotations = {symbol("x-opt-amq-mr-ev-type"): symbol(event),
                     **{symbol(k): v for k, v in ann.items()}}
    return bytes(m.encode())


def data_message(body: str, internal_id: Any, address: str | None = None,
                 properties: dict[str, Any] | None = None, **extra: Any) -> bytes:
    m = Message(body=body, durable=True, address=address, properties=properties)
    m.id = f"ID:artemis-{internal_id}"
    m.instructions = {symbol("x-opt-amq-mr-id"): internal_id, **{symbol(k): v for k, v in extra.items()}}
    return bytes(m.encode())


async def artemis_link(address: str, *, caps: list[str] | None = None,
                       bkr_id: str | None = ARTEMIS_NODE) -> tuple[AmqpConnection, Any]:
    conn = AmqpConnection(address, retry_interval=0.1, container_id=ARTEMIS_NODE,
                          properties={"broker-connection-info": {"connectionName": "relaymq",
                                                                 "nodeId": ARTEMIS_NODE}})
    await conn.connect()
    props = {"x-opt-amq-bkr-id": bkr_id} if bkr_id is not None else {}
    try:
        sender = await conn.open_sender(
            SNF, name=f"{SNF}:{uuid.uuid4()}", source_address=SNF, properties=props,
            desired_capabilities=caps if caps is not None else ["amq.mirror", "AMQ_CORE_MESSAGE_TUNNELING"],
            rcv_settle_first=True)
    except BaseException:
        await conn.close()
        raise
    return conn, sender
