"""The registry of outgoing connections: where plugins ask for one by URI and
where management reads their state.

Providers are found by URI scheme in the entry-point group ``relaymq.outgoing``
(relaymq-amqp: ``amqp``, ``amqps``, ``amqp+ssl``, ``tcp``, ``ssl``;
relaymq-stomp: ``stomp``, ``stomp+ssl``, ``stomp+nio``, ``stomp+nio+ssl``), or
registered in code with `register_provider` (tests, third-party transports
installed by hand). A broker owns one registry (`broker.outgoing`); a
standalone tool (``relaymq bridge run``) makes its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from relaymq.spi.outgoing import (
    ConnectionState,
    ConnectOptions,
    NoOutgoingProvider,
    OutgoingConnection,
    OutgoingProvider,
    parse_endpoints,
)

log = logging.getLogger("relaymq.outgoing")

GROUP = "relaymq.outgoing"


@dataclass(frozen=True, slots=True)
class OutgoingConnectionInfo:
    """A snapshot of one outgoing connection, as management lists it."""

    name: str
    uri: str
    scheme: str
    state: str
    peer: str | None
    last_error: str | None
    #: epoch ms of the last state change
    state_since: int
    connects: int
    failures: int
    owner: str | None

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}  # type: ignore[attr-defined]


def info_of(conn: OutgoingConnection) -> OutgoingConnectionInfo:
    return OutgoingConnectionInfo(
        name=conn.name, uri=conn.uri, scheme=conn.endpoints[0].scheme, state=conn.state.value,
        peer=conn.peer, last_error=conn.last_error,
        state_since=int(getattr(conn, "state_since", 0)), connects=int(getattr(conn, "connects", 0)),
        failures=int(getattr(conn, "failures", 0)), owner=conn.options.owner)


def _entry_points() -> dict[str, Any]:
    """``relaymq.outgoing`` entry points, for a registry made without a plugin registry."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=GROUP)}


class OutgoingConnections:
    """Makes outgoing connections by URI and keeps the list management shows.

    `plugins` (a `relaymq.plugins.PluginRegistry`) resolves providers from
    entry points with its usual errors (without one, entry points are read
    directly); `on_open(conn)` runs each time a
    connection opens (the broker fires ``relaymq_broker_connection_started``).
    """

    def __init__(self, plugins: Any | None = None,
                 on_open: Callable[[OutgoingConnection], Any] | None = None) -> None:
        self.plugins = plugins
        self.on_open = on_open
        self._providers: dict[str, OutgoingProvider] = {}
        self._connections: dict[str, OutgoingConnection] = {}

    # -- providers --------------------------------------------------------------------
    def register_provider(self, scheme: str, provider: OutgoingProvider) -> None:
        """Serve `scheme://` with `provider` (before entry points are consulted)."""
        if scheme in self._providers and self._providers[scheme] is not provider:
            raise ValueError(f"an outgoing provider for '{scheme}://' is already registered")
        self._providers[scheme] = provider

    def provider(self, scheme: str) -> OutgoingProvider:
        """The provider for `scheme`, or `NoOutgoingProvider` saying what to install."""
        found = self._providers.get(scheme)
        if found is not None:
            return found
        plugins = self.plugins
        names = plugins.names(GROUP) if plugins is not None else sorted(_entry_points())
        if scheme in names:
            found = plugins.resolve(GROUP, scheme) if plugins is not None \
                else _entry_points()[scheme].load()
            self._providers[scheme] = found
            return found
        installed = ", ".join(sorted(set(names) | set(self._providers))) or "none"
        hint = {"amqp": "pip install relaymq-amqp", "amqps": "pip install relaymq-amqp",
                "tcp": "pip install relaymq-amqp", "ssl": "pip install relaymq-amqp",
                "amqp+ssl": "pip install relaymq-amqp",
                "stomp": "pip install relaymq-stomp", "stomp+ssl": "pip install relaymq-stomp",
                "stomp+nio": "pip install relaymq-stomp"}.get(scheme)
        raise NoOutgoingProvider(
            f"no installed transport opens outgoing '{scheme}://' connections (installed: "
            f"{installed}); " + (f"install it with {hint}" if hint else
                                 "use amqp://, amqps://, stomp:// or stomp+ssl://"))

    # -- connections ------------------------------------------------------------------
    def open(self, uri: str, options: ConnectOptions | None = None) -> OutgoingConnection:
        """A new connection for `uri` (not connected yet: call `connect()` or,
        for a transport's `ReconnectingConnection`, `start()`)."""
        options = options or ConnectOptions()
        endpoints, common = parse_endpoints(uri)
        providers = {ep.scheme: self.provider(ep.scheme) for ep in endpoints}
        if len({id(p) for p in providers.values()}) > 1:
            raise ValueError(f"{uri!r}: every host of a failover list must use one protocol "
                             f"(got {', '.join(sorted(providers))})")
        name = options.name or uri
        if name in self._connections:
            n = 2
            while f"{name}-{n}" in self._connections:
                n += 1
            name = f"{name}-{n}"
        options.name = name
        conn = providers[endpoints[0].scheme](uri, endpoints, options, common)
        self._connections[name] = conn
        conn.add_listener(self._state_changed)
        return conn

    async def connect(self, uri: str, options: ConnectOptions | None = None) -> OutgoingConnection:
        """`open` and `connect`: returns an OPEN connection or raises `ConnectFailed`."""
        conn = self.open(uri, options)
        try:
            await conn.connect()
        except BaseException:
            await conn.close()
            raise
        return conn

    def _state_changed(self, conn: OutgoingConnection, state: ConnectionState) -> None:
        if state is ConnectionState.CLOSED:
            if self._connections.get(conn.name) is conn:
                del self._connections[conn.name]
        elif state is ConnectionState.OPEN and self.on_open is not None:
            self.on_open(conn)

    # -- what management reads ----------------------------------------------------------
    def list(self) -> list[OutgoingConnectionInfo]:
        """Every connection not closed yet, in the order they were opened."""
        return [info_of(c) for c in self._connections.values()]

    def get(self, name: str) -> OutgoingConnection | None:
        return self._connections.get(name)

    def __len__(self) -> int:
        return len(self._connections)

    async def close(self, name: str) -> None:
        """Close the connection called `name` (its owner sees its links fail)."""
        conn = self._connections.get(name)
        if conn is None:
            known = ", ".join(self._connections) or "none"
            raise KeyError(f"no outgoing connection named {name!r}; open: {known}")
        await conn.close()

    async def close_all(self) -> None:
        for conn in list(reversed(self._connections.values())):
            try:
                await conn.close()
            except Exception:  # noqa: BLE001
                log.exception("closing outgoing connection %s failed", conn.name)
