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
from relaymq.config.report import Report, at
from relaymq.config.typed import convert
from relaymq.outgoing.node import node_id
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

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        """`relaymq config check` (and `run`, before anything starts): the
        attributes converted; the operations (children) are checked as plugins of
        their own. Returns the warnings."""
        report = Report(strict=strict, quiet=True)  # returned: the caller reports them
        config = convert(BrokerConnectionConfig, element, strict=strict, report=report,
                         ignore=[c.tag for c in element.children])
        if config.retry_interval < 0:
            report.error(f"<{element.tag} retry-interval=\"{config.retry_interval}\">"
                         f"{at(element.origin)}: the interval must be 0 ms or more")
        report.raise_if_errors()
        return report.warnings

    @property
    def name(self) -> str:
        return self.config.name or self.config.uri

    @property
    def auto_start(self) -> bool:
        """False: the broker registers it but waits for `startBrokerConnection`
        (`broker.management.start_broker_connection(name)`)."""
        return self.config.auto_start

    @property
    def state(self) -> str:
        """For management: the connection's state (``connecting``, ``open``, ...)."""
        return self.connection.state.value if self.connection is not None else "stopped"

    def gave_up(self) -> bool:
        """Its reconnect attempts are used up: it connects again only when started."""
        conn = self.connection
        failed_for_good = getattr(conn, "failed_for_good", None)
        return bool(failed_for_good()) if callable(failed_for_good) else False

    def status(self) -> dict[str, Any]:
        """For management: ``connected``, ``target`` (the host it is or was last
        connected to), ``retries`` (failed attempts), the connection's counters and
        last error, and ``operations``: each child's name, element and, when it
        has a ``status()``, its details (a mirror's SnF depth and lag)."""
        out: dict[str, Any] = {"connected": False, "target": None, "retries": 0,
                               "auto_start": self.config.auto_start}
        if self.connection is not None:
            from relaymq.outgoing.registry import info_of

            info = info_of(self.connection).as_dict()
            out.update(info)
            out["connected"] = info.get("state") == "open"
            out["target"] = info.get("peer")
            out["retries"] = info.get("failures", 0)
        ops = []
        for child, op in zip(self.config.children, self.operations, strict=False):
            entry: dict[str, Any] = {"element": child.tag}
            status = getattr(op, "status", None)
            if callable(status):
                try:
                    entry.update(status())
                except Exception as exc:  # noqa: BLE001 - a listing must not fail
                    entry["error"] = f"{type(exc).__name__}: {exc}"
            ops.append(entry)
        out["operations"] = ops
        return out

    async def start(self) -> None:
        """Connect (in the background) and start the operations. The broker calls
        it at start-up unless ``auto-start="false"``; management calls it on
        `startBrokerConnection`; on a connection that gave up (its
        ``reconnect-attempts`` used up) it starts again from the first host."""
        if self.connection is not None:
            if not self.gave_up():
                return
            log.info("broker connection %s gave up earlier: starting it again", self.name)
            await self.stop()
        c = self.config
        node = node_id(self.broker)
        # as Artemis: the container id is the node id (the peer's federation reads
        # it as this broker's id: no-local, loops), and the open says which
        # broker connection of which node this is, and which product (as Artemis'
        # open says its own)
        options = ConnectOptions(name=self.name, user=c.user, password=c.password,
                                 retry_interval=c.retry_interval / 1000.0,
                                 reconnect_attempts=c.reconnect_attempts,
                                 client_id=node,
                                 properties={"product": "RelayMQ", "broker-connection-info": {
                                     "connectionName": self.name, "nodeId": node}},
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
