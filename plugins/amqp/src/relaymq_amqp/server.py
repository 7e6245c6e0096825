"""The `amqp://`, `amqps://` and `amqp+ssl://` transport connectors.

``<transportConnector uri="amqp://0.0.0.0:5672?maximumConnections=1000"/>``.
asyncio owns the listening socket and every accepted one (TLS with Python's
`ssl` for `amqps`/`amqp+ssl`, from ``certFile``/``keyFile``); each socket's
bytes go to an `AmqpConnection`, which is sans-IO.

URI options are listed in `OPTIONS` (ActiveMQ names; the ``wireFormat.`` and
``transport.`` prefixes are accepted too) and explained in docs/amqp.md.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING, Final, cast

from relaymq.spi.transport import ConnectorContext

from relaymq_amqp.connection import AmqpConnection
from relaymq_amqp.options import AmqpOptions

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker

log = logging.getLogger("relaymq.amqp")

_PREFIXES: Final = ("", "wireFormat.", "transport.")


def _opt(ctx: ConnectorContext, *names: str) -> str | None:
    for name in names:
        for prefix in _PREFIXES:
            value = ctx.option(prefix + name)
            if value is not None:
                return value
    return None


#: URI option -> (AmqpOptions field, kind). Aliases share a field. Every name
#: here is documented in docs/amqp.md (tests/test_docs.py checks it).
OPTIONS: dict[str, tuple[str, str]] = {
    "maximumConnections": ("maximum_connections", "int"),
    "maxFrameSize": ("max_frame_size", "int"),
    "maxAmqpFrameSize": ("max_frame_size", "int"),
    "channelMax": ("channel_max", "int"),
    "idleTimeout": ("idle_timeout_ms", "int"),
    "producerCredit": ("producer_credit", "int"),
    "maxMessageSize": ("max_message_size", "int"),
    "connectAttemptTimeout": ("connect_timeout_s", "ms"),
    "allowNonSaslConnections": ("allow_non_sasl", "bool"),
    "saslMechanisms": ("mechanisms", "list"),
    "sessionCapacity": ("session_capacity", "int"),
    "trace": ("trace", "bool"),
}
#: TLS options, read by the kernel's `ConnectorContext.ssl_context()`.
TLS_OPTIONS = ("certFile", "keyStore", "keyFile", "keyPassword", "caFile", "trustStore",
               "needClientAuth", "wantClientAuth")


def options_from(ctx: ConnectorContext) -> AmqpOptions:
    """Read the connector's URI options (unknown ones are reported by the broker)."""
    values: dict[str, object] = {}
    for name, (attr, kind) in OPTIONS.items():
        raw = _opt(ctx, name)
        if raw is None or raw == "":
            continue
        if kind == "bool":
            values[attr] = raw.strip().lower() in ("true", "1", "yes", "on")
        elif kind == "list":
            values[attr] = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
        else:
            try:
                number = int(raw)
            except ValueError:
                raise ValueError(
                    f"connector {ctx.uri.raw}: option {name}={raw!r} is not a number") from None
            values[attr] = number / 1000.0 if kind == "ms" else number
    options = AmqpOptions(**values)  # type: ignore[arg-type]
    options.producer_credit = max(options.producer_credit, 1)
    return options


class _Socket(asyncio.Protocol):
    """Bytes between one socket and its `AmqpConnection`."""

    def __init__(self, connector: AmqpConnector) -> None:
        self.connector = connector
        self.transport: asyncio.Transport | None = None
        self.conn: AmqpConnection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: no isinstance check.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        cert = transport.get_extra_info("peercert")
        c = self.connector
        refuse = None
        limit = c.options.maximum_connections
        if limit and len(c.connections) >= limit:
            refuse = f"maximumConnections ({limit}) reached"
        self.conn = AmqpConnection(
            cast("Broker", c.context.broker), c.options, transport.write, transport.close,
            remote_address=f"{peer[0]}:{peer[1]}" if peer else None,
            certificates=[cert] if cert else [], refuse=refuse,
        )
        c.connections.add(self)

    def data_received(self, data: bytes) -> None:
        assert self.conn is not None
        self.conn.feed(data)

    def eof_received(self) -> bool | None:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.connector.connections.discard(self)
        if self.conn is not None:
            self.conn.connection_lost()


class AmqpConnector:
    """A listening AMQP 1.0 connector."""

    def __init__(self, context: ConnectorContext) -> None:
        self.context = context
        self.scheme = context.uri.scheme
        self.options = options_from(context)
        self.ssl = context.ssl_context()
        self.connections: set[_Socket] = set()
        self._server: asyncio.base_events.Server | None = None
        self._address = ""

    async def start(self) -> None:
        uri = self.context.uri
        port = uri.port if uri.port is not None else (5671 if self.ssl else 5672)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Socket(self), uri.host, port, ssl=self.ssl, reuse_address=True,
            backlog=1024,
        )
        # getattr: uvloop's Server.sockets is a list where typeshed says tuple, and
        # compiled code checks the declared type
        sock = getattr(self._server, "sockets")[0].getsockname()  # noqa: B009
        host = uri.host if uri.host not in ("0.0.0.0", "::") else sock[0]
        self._address = f"{host}:{sock[1]}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for s in list(self.connections):
            if s.conn is not None:
                s.conn.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except TimeoutError:
                pass
            self._server = None
        for s in list(self.connections):
            if s.transport is not None:
                s.transport.abort()

    @property
    def address(self) -> str:
        return self._address

    def __repr__(self) -> str:
        return f"<AmqpConnector {self.scheme}://{self._address}>"


def AmqpTransportFactory(context: ConnectorContext) -> AmqpConnector:  # noqa: N802 - entry point
    """The `relaymq.transports` entry point for amqp, amqps and amqp+ssl."""
    return AmqpConnector(context)


__all__ = ["AmqpConnector", "AmqpTransportFactory", "options_from"]
