"""Broker connections (mirror, federation, bridge ...): a registry management
starts and stops them through.

A broker-connection plugin is a service with ``async start()`` and
``async stop()``; it may offer a ``state`` attribute (a short word:
``connecting``, ``connected``, ``reconnecting`` ...) and a ``status()`` method
returning a dict of details (peer, failover position, retries). The broker
registers every `<broker-connections>` element it builds; a plugin that opens
connections of its own registers them with `Management.register_broker_connection`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from relaymq.errors import DestinationError
from relaymq.management.info import BrokerConnectionInfo, IncomingBrokerConnectionInfo

log = logging.getLogger("relaymq.management")

STOPPED = "stopped"
STARTING = "starting"
STARTED = "started"
FAILED = "failed"


@dataclass(slots=True)
class _Registered:
    connection: Any
    kind: str
    uri: str | None
    state: str = STOPPED
    error: str | None = None


def _gave_up(connection: Any) -> bool:
    """A started connection whose reconnect attempts are used up: `start` retries it
    (as Artemis' startBrokerConnection does after a connection gave up)."""
    gave_up = getattr(connection, "gave_up", None)
    return bool(gave_up()) if callable(gave_up) else False


class BrokerConnections:
    def __init__(self, broker: Any) -> None:
        self._broker = broker
        self._entries: dict[str, _Registered] = {}

    def register(self, name: str, connection: Any, kind: str = "broker-connection",
                 uri: str | None = None) -> None:
        if name in self._entries:
            raise DestinationError(f"a broker connection named {name!r} is already registered")
        self._entries[name] = _Registered(connection, kind, uri)

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def _get(self, name: str) -> _Registered:
        entry = self._entries.get(name)
        if entry is None:
            known = ", ".join(sorted(self._entries)) or "none"
            raise DestinationError(f"no broker connection named {name!r}; registered: {known}")
        return entry

    async def start(self, name: str) -> None:
        entry = self._get(name)
        if entry.state in (STARTED, STARTING) and not _gave_up(entry.connection):
            return
        entry.state, entry.error = STARTING, None
        try:
            start = getattr(entry.connection, "start", None)
            if start is not None:
                await start()
        except Exception as exc:
            entry.state, entry.error = FAILED, f"{type(exc).__name__}: {exc}"
            raise
        entry.state = STARTED

    async def operation(self, name: str, operation: str) -> list[Any]:
        entry = self._get(name)
        if operation.startswith("_") or operation in ("start", "stop", "status"):
            raise DestinationError(f"{operation!r} is not an operation of a broker connection")
        ops = getattr(entry.connection, "operations", None) or []
        calls = [getattr(op, operation) for op in ops if callable(getattr(op, operation, None))]
        if not calls:
            raise DestinationError(f"broker connection {name!r} has no operation {operation!r}")
        return [await call() for call in calls]

    async def stop(self, name: str) -> None:
        entry = self._get(name)
        if entry.state == STOPPED:
            return
        stop = getattr(entry.connection, "stop", None)
        try:
            if stop is not None:
                await stop()
        finally:
            entry.state = STOPPED

    async def stop_all(self) -> None:
        for name in reversed(list(self._entries)):
            try:
                await self.stop(name)
            except Exception:  # noqa: BLE001 - stopping the others matters more
                log.exception("stopping broker connection %s failed", name)

    def describe(self) -> list[BrokerConnectionInfo]:
        out = []
        for name, entry in self._entries.items():
            conn = entry.connection
            state = entry.state
            reported = getattr(conn, "state", None)
            if state == STARTED and isinstance(reported, str):
                state = reported
            status = getattr(conn, "status", None)
            detail = dict(status()) if callable(status) else {}
            if entry.error:
                detail["error"] = entry.error
            out.append(BrokerConnectionInfo(name, entry.kind, entry.uri, state, detail))
        return out

    def __contains__(self, name: str) -> bool:
        return name in self._entries


class IncomingConnections:
    """Broker connections other brokers opened to this one, as the plugins that
    serve them register them (a mirror target: one entry per source broker).
    An entry is any object with a ``status()`` dict; ``kind``, ``remote_node``,
    ``remote_address`` and ``connected`` are read from it when present."""

    def __init__(self) -> None:
        self._entries: dict[str, Any] = {}

    def register(self, name: str, entry: Any) -> None:
        if name in self._entries and self._entries[name] is not entry:
            raise DestinationError(f"an incoming broker connection named {name!r} is already "
                                   "registered")
        self._entries[name] = entry

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def describe(self) -> list[IncomingBrokerConnectionInfo]:
        out = []
        for name, entry in self._entries.items():
            status = getattr(entry, "status", None)
            detail = dict(status()) if callable(status) else {}
            out.append(IncomingBrokerConnectionInfo(
                name, str(getattr(entry, "kind", "broker-connection")),
                getattr(entry, "remote_node", None), getattr(entry, "remote_address", None),
                bool(getattr(entry, "connected", False)), detail))
        return out
