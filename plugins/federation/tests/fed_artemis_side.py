"""The Artemis side of a federation, on the wire: a connection with Artemis'
container id and the control link Artemis opens (names, properties and
capabilities as shared/reference/artemis-broker-connections-wire.md gives them).
Shared by the wire tests."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from fedtools import Brokers
from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Terminus
from relaymq_amqp.outgoing import AmqpConnection
from relaymq_amqp.types import Symbol
from relaymq_federation import wire
from relaymq_federation.operation import DELETE_ON_CLOSE

NODE = "artemis-node-1"


async def artemis(brokers: Brokers, name: str = "b") -> AmqpConnection:
    conn = AmqpConnection(f"tcp://127.0.0.1:{brokers.port(name)}", container_id=NODE,
                          retry_interval=0.2, reconnect_attempts=0)
    await conn.connect()
    return conn


async def control_link(conn: AmqpConnection) -> Any:
    name = f"{wire.CONTROL_LINK_PREFIX}fed:{NODE}:{uuid.uuid4()}"
    target = Terminus(kind=2, dynamic=True, capabilities=["temporary-topic"],
                      expiry_policy=pn.EXPIRE_WITH_LINK,
                      dynamic_node_properties={Symbol("lifetime-policy"): DELETE_ON_CLOSE})
    link = await conn.attach_sender(
        name, Terminus(kind=1), target, desired_capabilities=[wire.CONTROL_LINK],
        properties={wire.VERSION: 2, wire.CONFIGURATION: {"amqpCredits": 1000},
                    wire.FEDERATION_NAME: "fed"})
    return link


async def until(cond: Any, what: str, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
