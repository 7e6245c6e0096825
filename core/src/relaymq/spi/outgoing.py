"""The outgoing-connection contract: how a plugin connects to another broker.

Mirror, federation and bridge plugins never import a transport plugin. They
ask the kernel's registry (`relaymq.outgoing.OutgoingConnections`) for a
connection by URI::

    conn = outgoing.open("amqp://dc2:5672#amqp://dc2b:5672",
                         ConnectOptions(name="dc2", user="u", password="p"))
    await conn.connect()
    session = await conn.session()
    sender = await session.open_sender("queue://orders")
    outcome = await sender.send(message)               # Outcome("accepted")
    receiver = await session.open_receiver("queue://in", on_delivery, credit=100)

The registry finds an `OutgoingProvider` by the URI's scheme (entry-point group
``relaymq.outgoing``: relaymq-amqp serves ``amqp``, ``amqps``, ``tcp``, ...;
relaymq-stomp serves ``stomp``, ``stomp+ssl``, ...). Messages cross the
contract as kernel `Message` objects: the transport converts them to and from
its wire format with the same mapping its server side uses, so a message that
arrived in the transport's own encoding is forwarded without re-encoding.

A connection reconnects by itself: hosts of a failover list are tried in
order, a round of failures waits `retry_interval` seconds, and after
`reconnect_attempts` rounds (-1: forever) the connection is FAILED. Its state,
peer and last error are what the management API shows.
"""

from __future__ import annotations

import asyncio
import enum
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qsl, unquote, urlsplit

from relaymq.model.message import Message


class ConnectionState(enum.StrEnum):
    """Where an outgoing connection is in its life."""

    CONNECTING = "connecting"  # first attempt under way
    OPEN = "open"
    RETRYING = "retrying"  # lost or never reached; waiting or trying again
    FAILED = "failed"  # gave up after reconnect_attempts rounds
    CLOSED = "closed"  # closed by its owner


class OutgoingError(ConnectionError):
    """An outgoing connection or link failed; `condition` is the peer's reason."""

    def __init__(self, message: str, condition: str | None = None) -> None:
        super().__init__(message)
        self.condition = condition


class ConnectFailed(OutgoingError):
    """No host of the URI could be reached (or none accepted us) within the policy."""


class AuthenticationFailed(OutgoingError):
    """The peer refused the credentials."""


class ConnectionLost(OutgoingError):
    """The connection dropped before the peer settled a send."""


class LinkRefused(OutgoingError):
    """The peer refused or closed a link (unknown address, not authorized, ...)."""


class NoOutgoingProvider(ValueError):
    """No installed transport provides outgoing connections for a URI scheme."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The peer's verdict on one send: accepted, rejected, released or modified."""

    state: str
    description: str | None = None

    @property
    def accepted(self) -> bool:
        return self.state == "accepted"


ACCEPTED = Outcome("accepted")

SettleCallback = Callable[[Outcome | BaseException], Any]


@dataclass(slots=True)
class Endpoint:
    """One host of a URI's failover list."""

    scheme: str
    host: str
    port: int | None
    user: str | None = None
    password: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}" if self.port else f"{self.scheme}://{self.host}"


def parse_endpoints(uri: str) -> tuple[list[Endpoint], dict[str, str]]:
    """The hosts of a URI and its connection-wide options.

    Accepts one URI (``amqp://h:5672``), Artemis' failover list
    (``tcp://a:5672#tcp://b:5672``) and ActiveMQ's failover form
    (``failover:(stomp://a:61613,stomp://b:61613)?randomize=false``), also
    combined. Query options of each host stay with that host; the ones after
    ``failover:(...)`` apply to all.
    """
    text = uri.strip()
    common: dict[str, str] = {}
    parts: list[str] = []
    for piece in text.split("#"):
        piece = piece.strip()
        if not piece:
            continue
        if piece.lower().startswith("failover:"):
            inner = piece[len("failover:"):].strip()
            if inner.startswith("("):
                close = inner.find(")")
                if close < 0:
                    raise ValueError(f"{uri!r}: 'failover:(' without ')'")
                query = inner[close + 1:]
                if query.startswith("?"):
                    common.update(parse_qsl(query[1:]))
                inner = inner[1:close]
            parts.extend(p.strip() for p in inner.split(",") if p.strip())
        else:
            parts.append(piece)
    endpoints = []
    for part in parts:
        u = urlsplit(part)
        if not u.scheme or not u.hostname:
            raise ValueError(f"{part!r} in {uri!r} is not scheme://host[:port]")
        try:
            port = u.port
        except ValueError as exc:
            raise ValueError(f"{part!r} in {uri!r}: {exc}") from None
        endpoints.append(Endpoint(u.scheme.lower(), u.hostname, port,
                                  unquote(u.username) if u.username else None,
                                  unquote(u.password) if u.password else None,
                                  dict(parse_qsl(u.query))))
    if not endpoints:
        raise ValueError(f"no host in {uri!r}")
    return endpoints, common


@dataclass(slots=True)
class ConnectOptions:
    """What a caller may say about a connection besides its URI."""

    #: the name management shows (and `relaymq_broker_connection_started` gets)
    name: str | None = None
    user: str | None = None
    password: str | None = None
    #: STOMP ``client-id`` (durable subscriptions), AMQP container id
    client_id: str | None = None
    #: seconds between rounds over the failover list
    retry_interval: float = 5.0
    #: rounds before giving up; -1 retries forever, 0 tries each host once
    reconnect_attempts: int = -1
    connect_timeout: float = 10.0
    #: idle timeout / heart-beat period in seconds (0: none)
    heartbeat: float = 30.0
    ssl_context: ssl.SSLContext | None = None
    #: STOMP ``host`` header / AMQP open hostname (RabbitMQ: the virtual host)
    virtual_host: str | None = None
    #: AMQP open: desired capabilities and properties (mirror: ``amq.mirror``)
    desired_capabilities: list[str] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    #: who asked for it (shown by management: "bridge orders", "mirror dc2")
    owner: str | None = None


@runtime_checkable
class Delivery(Protocol):
    """One received message, waiting for the receiver's verdict."""

    message: Message
    #: the peer delivered it before (redelivered flag / delivery count > 0)
    redelivered: bool

    def accept(self) -> None:
        """Consume it (AMQP accepted, STOMP ACK)."""

    def release(self) -> None:
        """Give it back undelivered (AMQP released, STOMP NACK where the peer redelivers)."""

    def reject(self, description: str | None = None) -> None:
        """Refuse it for good (AMQP rejected; STOMP NACK: the peer's redelivery policy)."""


@runtime_checkable
class SenderLink(Protocol):
    """Sends messages to one address (or, with address None, to each message's destination)."""

    address: str | None

    def send(self, message: Message, on_settled: SettleCallback | None = None) -> asyncio.Future[Outcome]:
        """Queue a message; the future (and `on_settled`) get the peer's `Outcome`,
        or `ConnectionLost` when the connection dropped first. Sends wait for
        credit (and for a reconnection) rather than fail."""

    @property
    def unsettled(self) -> int:
        """Sent, not yet settled by the peer."""

    async def close(self) -> None: ...


@runtime_checkable
class ReceiverLink(Protocol):
    """Receives from one address into a callback, within a credit window.

    A receiver opened with a selector may also have `selector_applied`: False when
    the peer said it does not apply it (AMQP: its attach leaves the selector filter
    out), True when it said it does; a protocol that cannot tell has no such attribute."""

    address: str

    def flow(self, credit: int) -> None:
        """Grant `credit` more messages."""

    async def close(self) -> None:
        """Detach; a durable subscription stays (see `unsubscribe`)."""


@runtime_checkable
class Session(Protocol):
    """A group of links on one connection."""

    async def open_sender(self, address: str | None, *, durable: bool = True,
                          capabilities: list[str] | None = None, name: str | None = None,
                          properties: dict[str, Any] | None = None,
                          desired_capabilities: list[str] | None = None,
                          source_address: str | None = None) -> SenderLink:
        """A sender; `durable` asks the peer to keep what it settles.

        Broker-to-broker links (AMQP): `name` is the link name, `properties` the
        link properties, `desired_capabilities` the link's desired capabilities
        (a mirror's ``amq.mirror``); the sender then has `remote_properties` and
        `remote_offered_capabilities` of the peer's answer. Transports without
        link properties ignore them."""

    async def open_receiver(self, address: str, on_delivery: Callable[[Delivery], Any], *,
                            credit: int = 100, selector: str | None = None,
                            subscription_name: str | None = None, browse: bool = False,
                            capabilities: list[str] | None = None) -> ReceiverLink:
        """A receiver. `on_delivery` runs on the loop for each message; settle
        each `Delivery` (credit is granted again as they are settled).
        `subscription_name` makes a durable topic subscription (with the
        connection's `client_id`); `selector` is a JMS selector."""

    async def unsubscribe(self, subscription_name: str) -> None:
        """Remove a durable subscription."""

    async def close(self) -> None: ...


@runtime_checkable
class OutgoingConnection(Protocol):
    """A connection to another broker that reconnects by itself."""

    uri: str
    name: str
    endpoints: list[Endpoint]
    options: ConnectOptions
    state: ConnectionState
    #: the host it is (or was last) connected to
    peer: str | None
    last_error: str | None

    async def connect(self) -> None:
        """Return once open; raise `ConnectFailed` (or `AuthenticationFailed`)
        when the policy gives up. Afterwards it reconnects on its own."""

    async def wait_open(self, timeout: float | None = None) -> None:
        """Wait until OPEN (again); `TimeoutError` past `timeout`."""

    async def session(self) -> Session:
        """A new session; its links are attached again after each reconnection."""

    def add_listener(self, listener: Callable[[OutgoingConnection, ConnectionState], Any]) -> None:
        """Call `listener(conn, state)` at every state change."""

    async def close(self) -> None:
        """Close and stop reconnecting (state CLOSED)."""


class OutgoingProvider(Protocol):
    """What a transport registers under ``relaymq.outgoing`` for each scheme it serves."""

    def __call__(self, uri: str, endpoints: list[Endpoint], options: ConnectOptions,
                 uri_options: dict[str, str]) -> OutgoingConnection: ...


@runtime_checkable
class ConnectionOperation(Protocol):
    """A child of ``<amqp-connection>`` (``<mirror>``, ``<federation>``, ``<sender>``, ...),
    built from the entry-point group ``relaymq.connection_operations``.

    `start` gets the connection as soon as the broker starts, usually before it
    is open: open sessions and links after ``await connection.wait_open()``, and
    listen (`add_listener`) to reopen what a reconnection needs. It may also
    have ``status() -> dict``: details for management's listing of broker
    connections (a mirror's store-and-forward depth and lag).
    """

    async def start(self, connection: OutgoingConnection) -> None: ...

    async def stop(self) -> None: ...
