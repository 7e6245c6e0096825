"""``<broker-connections><amqp-connection>``: an Artemis broker connection.

The element opens one outgoing connection through the broker's registry
(`broker.outgoing`) and hands it to each of its operations (``<mirror>``,
``<federation>``, ``<sender>``, ``<receiver>``, ``<peer>``: entry points of
``relaymq.connection_operations``, see `relaymq.spi.outgoing.ConnectionOperation`).
It connects in the background: a peer that is down does not hold up the
broker's start; it is retried every ``retry-interval`` ms up to
``reconnect-attempts`` times (-1: forever), as Artemis does.

relaymq-amqp registers it as ``amqp-connection``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from relaymq.config.model import Origin, PluginElement
from relaymq.config.typed import convert
from relaymq.spi.outgoing import ConnectOptions, OutgoingConnection

log = logging.getLogger("relaymq.outgoing")

CONNECTION_OPERATIONS = "relaymq.connection_operations"


@dataclass
class BrokerConnectionConfig:
    """The attributes of ``<amqp-connection>`` (Artemis' names)."""

    uri: str
    name: str | None = None
    user: str | None = None
    password: str | None = None
    #: ms between rounds over the hosts of `uri`
    retry_interval: int = 5000
    #: rounds before giving up; -1: forever
    reconnect_attempts: int = -1
    auto_start: bool = True
    origin: Origin | None = None
    children: list[PluginElement] = field(default_factory=list)


class BrokerConnection:
    """One configured broker connection and its operations."""

    def __init__(self, config: BrokerConnectionConfig, broker: Any,
                 operations: list[Any] | None = None) -> None:
        self.config = config
        self.broker = broker
        self.operations = operations or []
        self.connection: OutgoingConnection | None = None

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any) -> BrokerConnection:
        strict = bool(getattr(broker, "strict", False))
        config = convert(BrokerConnectionConfig, element, strict=strict,
                         ignore=[c.tag for c in element.children])
        config.children = list(element.children)
        ops = [broker.plugins.build(CONNECTION_OPERATIONS, child, broker) for child in element.children]
        return cls(config, broker, ops)

    @property
    def name(self) -> str:
        return self.config.name or self.config.uri

    @property
    def state(self) -> str:
        """For management: the connection's state (``connecting``, ``open``, ...)."""
        return self.connection.state.value if self.connection is not None else "stopped"

    def status(self) -> dict[str, Any]:
        """For management: peer, last error and counters of the connection."""
        if self.connection is None:
            return {}
        from relaymq.outgoing.registry import info_of

        return info_of(self.connection).as_dict()

    async def start(self) -> None:
        if not self.config.auto_start:
            log.info("broker connection %s: auto-start=false, not started", self.name)
            return
        c = self.config
        # Artemis opens broker connections with its node id as the container id;
        # the peer's federation reads it as this broker's id (no-local, loops).
        options = ConnectOptions(name=self.name, user=c.user, password=c.password,
                                 client_id=getattr(self.broker, "name", None) or None,
                                 retry_interval=c.retry_interval / 1000.0,
                                 reconnect_attempts=c.reconnect_attempts,
                                 owner=f"broker connection {self.name}")
        conn = self.broker.outgoing.open(c.uri, options)
        self.connection = conn
        start = getattr(conn, "start", None)
        if start is not None:
            start()
        else:  # a third-party connection without background start
            task = asyncio.get_running_loop().create_task(conn.connect())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        for op in self.operations:
            await op.start(conn)

    async def stop(self) -> None:
        for op in reversed(self.operations):
            try:
                await op.stop()
            except Exception:  # noqa: BLE001
                log.exception("stopping an operation of broker connection %s failed", self.name)
        if self.connection is not None:
            await self.connection.close()
            self.connection = None
