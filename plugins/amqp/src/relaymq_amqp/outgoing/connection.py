"""The outgoing AMQP connection: what broker connections (mirror, federation,
sender/receiver, peer) are built on.

```python
conn = AmqpConnection("tcp://b1:5672#tcp://b2:5672", user="u", password="p",
                      retry_interval=5.0, reconnect_attempts=-1)
await conn.connect()                       # the first reachable host
sender = await conn.open_sender("queue://orders")
outcome = await sender.send(encoded_amqp_bytes)   # Outcome("accepted")
receiver = await conn.open_receiver("queue://in", credit=100, on_message=handle)
await conn.close()
```

The same pieces as the server side: asyncio owns the socket (TLS with Python's
`ssl`), `sasl.SaslClient` answers SASL (PLAIN when a user is given, else
ANONYMOUS), and `engine.Engine` runs the AMQP layer. Messages are bytes, as
the broker stores them: nothing is decoded here.

Reconnection: when the connection drops, unsettled sends fail with
`ConnectionLost` (the caller owns retry -- a mirror resends from its queue),
sends still waiting for credit stay queued, and every link is attached again
on the next connection. Hosts after ``#`` are tried in order (Artemis'
failover list); `retry_interval` seconds pass between rounds, up to
`reconnect_attempts` rounds (-1: forever).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import uuid
from collections.abc import Callable
from typing import Any, cast

from relaymq.outgoing.base import ReconnectingConnection
from relaymq.spi.outgoing import AuthenticationFailed, ConnectOptions, Endpoint, OutgoingError

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Condition, Engine, Terminus
from relaymq_amqp.frames import FrameGuard
from relaymq_amqp.mapping import SELECTOR_FILTER_CODE
from relaymq_amqp.outgoing.common import (
    AmqpConnectionError,
    ConnectionLost,
    LinkRefused,
    check_scheme,
    is_tls,
    parse_uri,
    port_of,
)
from relaymq_amqp.outgoing.links import IncomingMessage, Receiver, Sender, _Link
from relaymq_amqp.outgoing.peer_links import PeerLinks
from relaymq_amqp.outgoing.session import AmqpSession
from relaymq_amqp.sasl import SaslClient, SaslError
from relaymq_amqp.types import Described, Symbol, ULong

log = logging.getLogger("relaymq.amqp.outgoing")

SELECTOR_FILTER = ULong(SELECTOR_FILTER_CODE)


class _Socket(asyncio.Protocol):
    def __init__(self, conn: AmqpConnection) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop transports are not subclasses
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.conn._feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._socket_lost(self, exc)


class AmqpConnection(ReconnectingConnection):
    """An outgoing AMQP 1.0 connection with failover hosts and reconnection."""

    protocol = "AMQP"

    def __init__(self, uri: str, *, user: str | None = None, password: str | None = None,
                 container_id: str | None = None, retry_interval: float = 5.0,
                 reconnect_attempts: int = -1, idle_timeout_ms: int = 30000,
                 max_frame_size: int = 1024 * 1024, ssl_context: ssl.SSLContext | None = None,
                 connect_timeout: float = 10.0, desired_capabilities: list[str] | None = None,
                 properties: dict[str, Any] | None = None,
                 on_connected: Callable[[AmqpConnection], Any] | None = None,
                 on_disconnected: Callable[[AmqpConnection, Exception | None], Any] | None = None,
                 name: str | None = None, owner: str | None = None,
                 endpoints: list[Endpoint] | None = None,
                 uri_options: dict[str, str] | None = None,
                 virtual_host: str | None = None) -> None:
        if endpoints is None:
            endpoints, uri_options = parse_uri(uri)
        options = ConnectOptions(
            name=name, user=user, password=password, client_id=container_id,
            retry_interval=retry_interval, reconnect_attempts=reconnect_attempts,
            connect_timeout=connect_timeout, heartbeat=idle_timeout_ms / 1000.0,
            ssl_context=ssl_context, virtual_host=virtual_host,
            desired_capabilities=list(desired_capabilities or []),
            properties=dict(properties or {}), owner=owner)
        super().__init__(uri, endpoints, options, uri_options)
        self.user = user
        self.password = password
        self.container_id = container_id or f"relaymq-{uuid.uuid4()}"
        self.idle_timeout_ms = idle_timeout_ms
        self.max_frame_size = max_frame_size
        self.ssl_context = ssl_context
        self.connect_timeout = connect_timeout
        self.desired_capabilities = desired_capabilities
        self.properties = properties
        self.on_connected = on_connected
        self.on_disconnected = on_disconnected
        self.endpoint: Endpoint | None = None
        self.remote_container: str | None = None
        self.remote_offered_capabilities: list[str] = []
        self.remote_properties: dict[str, Any] = {}
        self._links: dict[str, _Link] = {}
        self._by_ptr: dict[Any, _Link] = {}
        #: the same map under the name `Engine.pump` looks for: a delivery or a
        #: settlement of one of our links goes straight to the link's (compiled)
        #: `on_delivery`, not through this (interpreted) class
        self.links: dict[Any, _Link] = self._by_ptr
        self._lost: asyncio.Future[Any] | None = None
        self._engine: Engine | None = None
        #: reads the capabilities of the peer's attaches (proton drops them), see `attach`
        self._guard = FrameGuard(max_frame_size)
        self._sasl: SaslClient | None = None
        self._socket: _Socket | None = None
        self._session: Any = None
        #: sessions of their own, by name, begun for the links that ask for one
        #: (`attach_sender(session=...)`): a peer that ends one (RabbitMQ ends the
        #: session of an attach it refuses) takes only their links with it
        self._sessions: dict[str, Any] = {}
        self._opened: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._flush_scheduled = False
        self._names = 0
        self._close_reason: Exception | None = None
        #: links the peer attaches (`serve_peer_links`), None: not served
        self.peer_links: PeerLinks | None = None

    def serve_peer_links(self, broker: Any) -> PeerLinks:
        """Serve links the peer attaches over this connection with `broker`'s
        ``relaymq.amqp_link_handlers`` (federation receivers of a peer that applies
        remote policies); without it they are left unanswered."""
        if self.peer_links is None:
            self.peer_links = PeerLinks(self, broker)
        return self.peer_links

    @classmethod
    def provide(cls, uri: str, endpoints: list[Endpoint], options: ConnectOptions,
                uri_options: dict[str, str]) -> AmqpConnection:
        """The `relaymq.outgoing` provider: a connection for the kernel registry."""
        for ep in endpoints:
            check_scheme(ep, uri)
        return cls(uri, user=options.user, password=options.password,
                   container_id=options.client_id, retry_interval=options.retry_interval,
                   reconnect_attempts=options.reconnect_attempts,
                   idle_timeout_ms=int(options.heartbeat * 1000),
                   ssl_context=options.ssl_context, connect_timeout=options.connect_timeout,
                   desired_capabilities=options.desired_capabilities or None,
                   properties=options.properties or None, name=options.name,
                   owner=options.owner, endpoints=endpoints, uri_options=uri_options,
                   virtual_host=options.virtual_host)

    async def wait_connected(self, timeout: float | None = None) -> None:
        await self.wait_open(timeout)

    async def session(self) -> AmqpSession:
        """A session of the contract (`relaymq.spi.outgoing.Session`): links that
        send and receive kernel messages. (All of them share the connection's
        one AMQP session.)"""
        return AmqpSession(self)

    async def _connect_endpoint(self, ep: Endpoint) -> asyncio.Future[Any]:
        return await self._connect_once(ep)

    async def _connect_once(self, ep: Endpoint) -> asyncio.Future[Any]:
        """Connect, authenticate and open; returns a future that completes when
        this connection is lost."""
        ctx = None
        opts = {**self.uri_options, **ep.options}
        if is_tls(ep, opts):
            ctx = self.ssl_context or ssl.create_default_context(cafile=opts.get("caFile")
                                                                 or opts.get("trustStorePath"))
            if opts.get("verifyHost", "true").lower() == "false":
                ctx.check_hostname = False
        self.endpoint = ep
        self._close_reason = None
        self._engine = Engine(server=False, max_frame_size=self.max_frame_size,
                              idle_timeout_ms=self.idle_timeout_ms)
        self._guard = FrameGuard(0)
        self._sasl = SaslClient(ep.user or self.user, ep.password or self.password, ep.host)
        self._opened = self.loop.create_future()
        lost: asyncio.Future[Any] = self.loop.create_future()
        self._lost = lost
        try:
            _, sock = await asyncio.wait_for(
                self.loop.create_connection(lambda: _Socket(self), ep.host, port_of(ep), ssl=ctx),
                self.connect_timeout)
            self._socket = sock
            assert sock.transport is not None
            sock.transport.write(self._sasl.start())
            await asyncio.wait_for(asyncio.shield(self._opened), self.connect_timeout)
        except BaseException:
            self._teardown()
            raise
        for link in list(self._links.values()):
            self._attach(link)
        self._flush()
        if self.on_connected is not None:
            self.on_connected(self)
        return lost

    # -- bytes ------------------------------------------------------------------------
    def _feed(self, data: bytes) -> None:
        engine = self._engine
        if engine is None:
            return
        sasl = self._sasl
        if sasl is not None:
            try:
                out, ok, leftover = sasl.feed(data)
            except SaslError as exc:
                self._abort(AmqpConnectionError(f"SASL failed: {exc}"))
                return
            if out:
                self._write(out)
            if ok is None:
                return
            if not ok:
                self._abort(AuthenticationFailed(f"authentication refused by {self.endpoint}"))
                return
            self._sasl = None
            engine.open(container_id=self.container_id,
                        hostname=self.options.virtual_host or (self.endpoint.host if self.endpoint else None),
                        desired_capabilities=self.desired_capabilities,
                        properties={Symbol(k): v for k, v in (self.properties or {}).items()})
            self._session = engine.session()
            pn.session_open(self._session)
            data = leftover
        if data:
            self._guard.feed(data)  # only to learn link capabilities; proton judges the frames
            engine.push(data)
        self._process()

    def _write(self, data: bytes) -> None:
        if self._socket is not None and self._socket.transport is not None:
            self._socket.transport.write(data)

    def _process(self) -> None:
        engine = self._engine
        if engine is None:
            return
        engine.pump(self)
        if self._engine is None:
            return
        out = engine.output()
        while out:
            self._write(out)
            out = engine.output()
        if self._timer is None and self._opened is not None and self._opened.done():
            self._arm_timer()

    def _flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._do_flush)

    def _do_flush(self) -> None:
        self._flush_scheduled = False
        self._process()

    def _arm_timer(self) -> None:
        if self._engine is None:
            return
        now = pn.monotonic_ms()
        deadline = self._engine.tick(now)
        if deadline:
            self._timer = self.loop.call_later(max(deadline - now, 1) / 1000.0, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._arm_timer()
        self._process()

    # -- engine events -----------------------------------------------------------------
    def on_connection_remote_open(self) -> None:
        assert self._engine is not None
        self.remote_container = self._engine.remote_container
        self.remote_offered_capabilities = self._engine.remote_offered_capabilities
        props = self._engine.remote_properties
        #: the peer's open properties (string keys): RelayMQ says ``product: RelayMQ``
        self.remote_properties = {str(k): v for k, v in props.items()} if isinstance(props, dict) else {}
        if self._opened is not None and not self._opened.done():
            self._opened.set_result(None)

    def on_connection_remote_close(self) -> None:
        assert self._engine is not None
        cond = self._engine.remote_condition
        if self.closing and cond is None:
            # the peer's answer to this side's own close: nothing to report
            log.debug("AMQP connection %s: %s closed the connection in answer", self.name, self.endpoint)
            self._abort(None)
            return
        err = AmqpConnectionError(f"{self.endpoint} closed the connection: {cond or 'no reason'}", cond)
        if self._opened is not None and not self._opened.done():
            self._opened.set_exception(err)
        if not self._engine.local_closed:
            self._engine.close()
        self._abort(err)

    def on_session_remote_open(self, session: Any) -> None:
        pass

    def on_session_remote_close(self, session: Any) -> None:
        cond = pn.session_remote_condition(session)
        name = next((n for n, s in self._sessions.items() if s == session), None)
        if name is None:  # the connection's session, which nearly every link is on
            self._abort(AmqpConnectionError(f"{self.endpoint} ended the session: {cond or 'no reason'}",
                                            cond))
            return
        # a session of its own: its links end, the connection and its other links go on
        del self._sessions[name]
        err = LinkRefused(f"{self.endpoint} ended the session of {name}: {cond or 'no reason'}", cond)
        log.debug("AMQP connection %s: %s", self.name, err)
        for link in [lk for lk in self._links.values() if lk.session_name == name]:
            self._links.pop(link.name, None)
            if link.pn is not None:
                self._by_ptr.pop(link.pn, None)
                link.pn = None
            opened = link.attached.done()
            link.closed = True
            link._lost(err)
            if not opened:
                link.attached.set_exception(err)
            elif link.on_remote_close is not None:
                link.on_remote_close(cond)
        if self.peer_links is not None:
            self.peer_links.session_lost(session)
        pn.session_close(session)
        pn.session_free(session)
        self._flush()

    def on_link_remote_open(self, link: Any) -> None:
        handler = self._by_pn(link)
        if handler is not None:
            if self._guard.attaches:
                caps = self._guard.attaches.pop((handler.name, bool(pn.link_is_sender(link))), None)
                if caps is not None:
                    handler.remote_offered_capabilities, handler.remote_desired_capabilities = caps
            handler._opened()
        elif self.peer_links is not None:
            caps = self._guard.attaches.pop((pn.link_name(link), bool(pn.link_is_sender(link))),
                                            None) if self._guard.attaches else None
            self.peer_links.opened(link, caps)

    def on_link_remote_close(self, link: Any, closed: bool) -> None:
        handler = self._by_pn(link)
        if handler is not None:
            handler._remote_closed()
        elif self.peer_links is not None:
            self.peer_links.remote_closed(link, closed)

    def on_link_flow(self, link: Any) -> None:
        handler = self._by_pn(link)
        if isinstance(handler, Sender):
            handler._on_flow()
        elif handler is None and self.peer_links is not None:
            self.peer_links.flow(link)

    def on_delivery(self, link: Any, delivery: Any) -> None:
        handler = self._by_pn(link)
        if handler is not None:
            handler._on_delivery(delivery)  # type: ignore[attr-defined]
        elif self.peer_links is not None:
            self.peer_links.delivery(link, delivery)

    def on_transport_error(self) -> None:
        assert self._engine is not None
        log.info("AMQP connection to %s: %s", self.endpoint, self._engine.transport_condition)

    def on_transport_closed(self) -> None:
        pass

    def _by_pn(self, link: Any) -> _Link | None:
        return self._by_ptr.get(link)

    # -- links -------------------------------------------------------------------------
    def _name(self, prefix: str) -> str:
        self._names += 1
        return f"{self.container_id}-{prefix}-{self._names}"

    def _attach(self, link: _Link) -> None:
        if link.attached.done():
            link.attached = self.loop.create_future()
        link.remote_offered_capabilities, link.remote_desired_capabilities = [], []
        if (link.offered_capabilities or link.desired_capabilities) and self._engine is not None:
            self._engine.attach_patches[link.name] = (link.offered_capabilities or None,
                                                      link.desired_capabilities or None)
        link._attach(self._session if link.session_name is None else self._own_session(link.session_name))
        self._by_ptr[link.pn] = link

    def _own_session(self, name: str) -> Any:
        session = self._sessions.get(name)
        if session is None:
            assert self._engine is not None
            session = self._sessions[name] = self._engine.session()
            pn.session_open(session)
        return session

    async def _open(self, link: _Link) -> None:
        if link.name in self._links:
            raise ValueError(f"a link named {link.name!r} is already open")
        self._links[link.name] = link
        if self._live:
            self._attach(link)
            self._flush()
        try:
            await asyncio.wait_for(asyncio.shield(link.attached), self.connect_timeout)
        except BaseException:
            self._links.pop(link.name, None)
            raise

    async def open_sender(self, address: str | None, *, name: str | None = None,
                          capabilities: list[str] | None = None, presettled: bool = False,
                          durable: bool = False, source_address: str | None = None,
                          properties: dict[str, Any] | None = None,
                          desired_capabilities: list[str] | None = None,
                          offered_capabilities: list[str] | None = None,
                          rcv_settle_first: bool = False) -> Sender:
        """A sender to `address` (None: the anonymous relay, `to` in each message).

        `properties` (keys become symbols) and the link's desired/offered
        capabilities go on the attach (a mirror desires ``amq.mirror``); the
        peer's come back in `remote_properties` and `remote_offered_capabilities`."""
        target = Terminus(address=address, capabilities=capabilities or [], kind=2,
                          durable=1 if durable else 0)
        sender = Sender(self, name or self._name("sender"), Terminus(address=source_address, kind=1),
                        target, presettled)
        sender.properties = dict(properties or {})
        sender.desired_capabilities = list(desired_capabilities or [])
        sender.offered_capabilities = list(offered_capabilities or [])
        sender.rcv_settle_first = rcv_settle_first
        await self._open(sender)
        return sender

    async def open_receiver(self, address: str | None, *, on_message: Callable[[IncomingMessage], Any],
                            credit: int = 100, name: str | None = None,
                            capabilities: list[str] | None = None, selector: str | None = None,
                            dynamic: bool = False, durable: bool = False, browse: bool = False,
                            auto_accept: bool = False, configuration_durable: bool = False) -> Receiver:
        """A receiver from `address`; `on_message` gets each `IncomingMessage`
        (settle it with accept/release/reject/modify, or use `auto_accept`)."""
        source = Terminus(address=address, capabilities=capabilities or [], kind=1, dynamic=dynamic,
                          durable=2 if durable else (1 if configuration_durable else 0),
                          expiry_policy=pn.EXPIRE_NEVER if durable else pn.EXPIRE_WITH_LINK,
                          distribution_mode=pn.DIST_MODE_COPY if browse else 0)
        if selector:
            source.filter = {Symbol("jms-selector"): Described(SELECTOR_FILTER, selector)}
        receiver = Receiver(self, name or self._name("receiver"), source, Terminus(kind=2), credit,
                            on_message, auto_accept)
        await self._open(receiver)
        return receiver

    async def attach_sender(self, name: str, source: Terminus, target: Terminus, *,
                            properties: dict[str, Any] | None = None,
                            desired_capabilities: list[str] | None = None,
                            presettled: bool = False, session: str | None = None) -> Sender:
        """A sender with termini, link properties and desired capabilities as
        given (federation's control link: a dynamic target, Artemis' link
        properties, ``AMQ_FEDERATION_CONTROL_LINK``). `session`: the name of a
        session of its own (begun on first use, again after a reconnection), so
        that a peer ending it to refuse the link (RabbitMQ) leaves the connection
        and its other links alone; the link then fails with `LinkRefused`."""
        sender = Sender(self, name, source, target, presettled)
        sender.properties = dict(properties or {})
        sender.desired_capabilities = list(desired_capabilities or [])
        sender.session_name = session
        await self._open(sender)
        return sender

    async def attach_receiver(self, name: str, source: Terminus, target: Terminus, *,
                              on_message: Callable[[IncomingMessage], Any], credit: int = 100,
                              properties: dict[str, Any] | None = None,
                              desired_capabilities: list[str] | None = None,
                              on_remote_close: Callable[[Condition | None], None] | None = None,
                              ) -> Receiver:
        """A receiver with termini, link properties and desired capabilities as
        given (federation's address and queue receivers). `on_remote_close`: see
        `Receiver.on_remote_close` (set before the attach: a peer may close the
        link in the same frames that answer it)."""
        receiver = Receiver(self, name, source, target, credit, on_message, False)
        receiver.on_remote_close = on_remote_close
        receiver.properties = dict(properties or {})
        receiver.desired_capabilities = list(desired_capabilities or [])
        await self._open(receiver)
        return receiver

    # -- teardown ----------------------------------------------------------------------
    def _abort(self, error: Exception | None) -> None:
        if self._aborting:
            return  # called again from inside the pump below
        self._aborting = True
        try:
            self._close_reason = error
            opened = self._opened
            opening = opened is not None and not opened.done()
            if opened is not None and opening and error is not None:
                opened.set_exception(error)
            if error is not None:
                # while opening, the failure is the connection policy's to log (once
                # per host and error, not at every retry)
                log.log(logging.DEBUG if opening else logging.INFO, "AMQP connection %s: %s",
                        self.name, error)
            if self._socket is not None and self._socket.transport is not None:
                self._process()
                if self._socket is not None and self._socket.transport is not None:
                    self._socket.transport.close()
        finally:
            self._aborting = False

    _aborting = False

    def _socket_lost(self, sock: _Socket, exc: Exception | None) -> None:
        if sock is not self._socket:
            return
        err = ConnectionLost(f"connection to {self.endpoint} lost{': ' + str(exc) if exc else ''}")
        if self._opened is not None and not self._opened.done():
            self._opened.set_exception(err)
        was_connected = self.connected
        self._teardown()
        for link in list(self._links.values()):
            link._lost(err)
            link.pn = None
        if was_connected and self.on_disconnected is not None:
            self.on_disconnected(self, exc)
        lost = self._lost
        if lost is not None and not lost.done():
            lost.set_result(exc or self._close_reason)

    def _teardown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._engine is not None:
            self._engine.close_tail()
            self._engine.free()
            self._engine = None
        self._session = None
        self._sessions.clear()
        self._by_ptr.clear()
        if self.peer_links is not None:
            self.peer_links.lost()
        if self._socket is not None and self._socket.transport is not None:
            self._socket.transport.abort()
        self._socket = None

    @property
    def closing(self) -> bool:
        """This side has closed the connection: what the peer closes after that is its answer."""
        return self._engine is not None and self._engine.local_closed

    @property
    def _live(self) -> bool:
        """Open on the wire right now (the state may lag a loop turn behind)."""
        return self._session is not None and self._opened is not None and self._opened.done() \
            and self._engine is not None

    def _give_up(self, error: OutgoingError) -> None:
        self._fail_all(error)

    def _fail_all(self, error: Exception) -> None:
        for link in list(self._links.values()):
            link.closed = True
            link._lost(error)
            if not link.attached.done():
                link.attached.set_exception(error)

    async def _shutdown(self) -> None:
        if self._engine is not None and self._live:
            self._engine.close()
            self._process()
            lost = self._lost
            if lost is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(lost), 2.0)
                except TimeoutError:
                    pass
        self._teardown()
