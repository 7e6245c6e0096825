"""The outgoing STOMP connection: what bridges (and any plugin) use to reach a
STOMP broker -- RelayMQ, ActiveMQ Classic, Artemis, RabbitMQ.

```python
conn = registry.open("stomp://a:61613#stomp://b:61613", ConnectOptions(user="u", password="p"))
await conn.connect()
session = await conn.session()
sender = await session.open_sender("/queue/orders")
outcome = await sender.send(message)        # RECEIPT -> Outcome("accepted")
```

CONNECT offers STOMP 1.0-1.2 with `login`/`passcode`, `client-id` (durable
subscriptions), `host` (`virtual_host`, or the URI option `virtualHost`;
RabbitMQ wants its vhost there, e.g. ``?virtualHost=/``) and heart-beats.
Frames go through the server side's sans-IO `FrameParser`. An ERROR answering
CONNECT fails that attempt (`AuthenticationFailed` when credentials were
refused); an ERROR naming a receipt fails that request only; any other ERROR
is logged and recorded as the last error. Hosts of a failover list, retries and
state are `relaymq.outgoing.ReconnectingConnection`'s.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import ssl
import time
from typing import Any, cast

from relaymq.model.destination import Destination
from relaymq.outgoing.base import ReconnectingConnection
from relaymq.spi import outgoing as spi
from relaymq.spi.outgoing import ConnectOptions, Endpoint

from relaymq_stomp.codec import FrameParser
from relaymq_stomp.errors import StompError
from relaymq_stomp.frames import V10, Frame, escape, unescape_headers
from relaymq_stomp.outgoing.convert import name_of
from relaymq_stomp.outgoing.links import StompReceiver, StompSender, StompSession

log = logging.getLogger("relaymq.stomp.outgoing")

PLAIN_SCHEMES = ("stomp", "stomp+nio")
TLS_SCHEMES = ("stomp+ssl", "stomp+nio+ssl", "stomp+tls")
_AUTH_WORDS = re.compile(r"auth|password|passcode|login|credential|access refused|not authori",
                         re.IGNORECASE)


class _Socket(asyncio.Protocol):
    def __init__(self, conn: StompConnection) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.conn._feed(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._socket_lost(self, exc)


class StompConnection(ReconnectingConnection):
    """An outgoing STOMP connection with failover hosts and reconnection."""

    protocol = "STOMP"
    #: sends waiting for a receipt at once, per sender
    send_window = 1000

    def __init__(self, uri: str, endpoints: list[Endpoint], options: ConnectOptions,
                 uri_options: dict[str, str] | None = None) -> None:
        super().__init__(uri, endpoints, options, uri_options)
        for ep in endpoints:
            if ep.scheme not in PLAIN_SCHEMES + TLS_SCHEMES:
                raise ValueError(f"{ep} in {uri!r}: a STOMP connection takes stomp:// or stomp+ssl://")
        self.version = V10
        #: bumped at each connection: acks of deliveries from a lost one are dropped
        self.generation = 0
        self.live = False
        self.server: str | None = None
        self.senders: set[StompSender] = set()
        self.receivers: dict[str, StompReceiver] = {}
        self._receipts: dict[str, StompSender | asyncio.Future[None]] = {}
        self._ids = itertools.count(1)
        self._socket: _Socket | None = None
        self._parser = FrameParser()
        self._connected: asyncio.Future[dict[str, str]] | None = None
        self._lost: asyncio.Future[Any] | None = None
        self._out: list[bytes] = []
        self._last_read = 0.0
        self._hb_task: asyncio.Task[None] | None = None

    @classmethod
    def provide(cls, uri: str, endpoints: list[Endpoint], options: ConnectOptions,
                uri_options: dict[str, str]) -> StompConnection:
        """The `relaymq.outgoing` provider."""
        return cls(uri, endpoints, options, uri_options)

    async def session(self) -> StompSession:
        return StompSession(self)

    # -- helpers the links use ---------------------------------------------------------
    def name_of(self, dest: Destination) -> str:
        return name_of(dest)

    def next_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def next_receipt(self, owner: StompSender) -> str:
        rid = f"r-{next(self._ids)}"
        self._receipts[rid] = owner
        return rid

    def forget_receipt(self, rid: str) -> None:
        self._receipts.pop(rid, None)

    def write(self, data: bytes, flush: bool = True) -> None:
        self._out.append(data)
        if flush:
            self.flush()

    def flush(self) -> None:
        out = self._out
        if not out:
            return
        self._out = []
        sock = self._socket
        if sock is not None and sock.transport is not None:
            sock.transport.write(b"".join(out) if len(out) > 1 else out[0])

    def encode(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
        version = self.version if command not in ("CONNECT", "STOMP") else V10
        lines = [command] + [f"{escape(k, version)}:{escape(v, version)}" for k, v in headers]
        if body:
            lines.append(f"content-length:{len(body)}")
        return ("\n".join(lines) + "\n\n").encode() + body + b"\x00"

    def send_frame(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        self.write(self.encode(command, headers, body))

    async def request(self, command: str, headers: list[tuple[str, str]]) -> None:
        """Send a frame with a receipt and wait for it (an ERROR naming it raises `LinkRefused`)."""
        rid = f"r-{next(self._ids)}"
        fut: asyncio.Future[None] = self.loop.create_future()
        self._receipts[rid] = fut
        self.send_frame(command, [*headers, ("receipt", rid)])
        try:
            await asyncio.wait_for(fut, self.options.connect_timeout)
        finally:
            self._receipts.pop(rid, None)

    # -- connecting ------------------------------------------------------------------
    def _tls(self, ep: Endpoint) -> ssl.SSLContext | None:
        opts = {**self.uri_options, **ep.options}
        if ep.scheme not in TLS_SCHEMES and opts.get("sslEnabled", "").lower() != "true":
            return None
        ctx = self.options.ssl_context or ssl.create_default_context(
            cafile=opts.get("caFile") or opts.get("trustStorePath"))
        if opts.get("verifyHost", "true").lower() == "false":
            ctx.check_hostname = False
        return ctx

    async def _connect_endpoint(self, ep: Endpoint) -> asyncio.Future[Any]:
        ctx = self._tls(ep)
        port = ep.port or (61612 if ctx is not None else 61613)
        opts = {**self.uri_options, **ep.options}
        self._parser = FrameParser()
        self._connected = self.loop.create_future()
        lost: asyncio.Future[Any] = self.loop.create_future()
        self._lost = lost
        timeout = self.options.connect_timeout
        try:
            _, sock = await asyncio.wait_for(
                self.loop.create_connection(lambda: _Socket(self), ep.host, port, ssl=ctx), timeout)
            self._socket = sock
            hb = int(self.options.heartbeat * 1000)
            headers = [("accept-version", "1.0,1.1,1.2"),
                       ("host", self.options.virtual_host or opts.get("virtualHost") or ep.host),
                       ("heart-beat", f"{hb},{hb}")]
            user = ep.user or self.options.user
            password = ep.password or self.options.password
            if user is not None:
                headers += [("login", user), ("passcode", password or "")]
            if self.options.client_id:
                headers.append(("client-id", self.options.client_id))
            self.write(self.encode("CONNECT", headers))
            connected = await asyncio.wait_for(asyncio.shield(self._connected), timeout)
        except BaseException:
            self._drop_socket()
            raise
        self.version = connected.get("version", V10)
        self.server = connected.get("server")
        self.generation += 1
        self.live = True
        self._start_heartbeats(connected.get("heart-beat", "0,0"), hb)
        for receiver in list(self.receivers.values()):
            self.send_frame(*receiver.subscribe_frame())
        for sender in list(self.senders):
            sender.pump()
        return lost

    def _start_heartbeats(self, server_hb: str, ours: int) -> None:
        try:
            sx, sy = (int(x) for x in server_hb.split(","))
        except ValueError:
            sx = sy = 0
        send_every = max(ours, sy) / 1000.0 if ours and sy else 0.0
        expect_every = max(ours, sx) / 1000.0 if ours and sx else 0.0
        if send_every or expect_every:
            self._last_read = time.monotonic()
            self._hb_task = self.loop.create_task(self._heartbeats(send_every, expect_every))

    async def _heartbeats(self, send_every: float, expect_every: float) -> None:
        tick = min(x for x in (send_every, expect_every) if x) / 2
        last_sent = time.monotonic()
        while self.live:
            await asyncio.sleep(tick)
            now = time.monotonic()
            if send_every and now - last_sent >= send_every:
                self.write(b"\n")
                last_sent = now
            if expect_every and now - self._last_read > 2 * expect_every:
                log.info("STOMP connection %s: no heart-beat from %s", self.name, self.peer)
                self._abort("no heart-beat from the peer")
                return

    # -- frames ----------------------------------------------------------------------
    def _feed(self, sock: _Socket, data: bytes) -> None:
        if sock is not self._socket:
            return
        self._last_read = time.monotonic()
        try:
            frames = self._parser.feed(data)
        except StompError as exc:
            frames = self._parser.error_frames
            for frame in frames:
                self._on_frame(frame)
            self._abort(f"unreadable bytes from the peer: {exc}")
            return
        for frame in frames:
            self._on_frame(frame)

    def _on_frame(self, frame: Frame) -> None:
        headers = frame.headers
        command = frame.command
        if frame.escaped and (command != "CONNECTED"):
            headers = unescape_headers(headers, self.version)
        if command == "MESSAGE":
            receiver = self.receivers.get(headers.get("subscription", ""))
            if receiver is not None:
                receiver.on_message(headers, frame.body)
            return
        if command == "RECEIPT":
            rid = headers.get("receipt-id", "")
            owner = self._receipts.pop(rid, None)
            if isinstance(owner, StompSender):
                owner.receipted(rid, spi.ACCEPTED)
            elif owner is not None and not owner.done():
                owner.set_result(None)
            return
        if command == "CONNECTED":
            if self._connected is not None and not self._connected.done():
                self._connected.set_result(headers)
            return
        if command == "ERROR":
            self._on_error(headers, frame.body)

    def _on_error(self, headers: dict[str, str], body: bytes) -> None:
        text = headers.get("message") or "ERROR"
        detail = body.decode("utf-8", "replace").strip()
        reason = f"{text}{': ' + detail[:300] if detail and detail != text else ''}"
        connecting = self._connected
        if connecting is not None and not connecting.done():
            err: spi.OutgoingError = (spi.AuthenticationFailed(f"{self.peer_text()} refused the "
                                                               f"credentials: {reason}", text)
                                      if _AUTH_WORDS.search(reason) else
                                      spi.OutgoingError(f"{self.peer_text()} refused CONNECT: {reason}",
                                                        text))
            connecting.set_exception(err)
            return
        self.last_error = reason
        rid = headers.get("receipt-id")
        owner = self._receipts.pop(rid, None) if rid else None
        if isinstance(owner, StompSender):
            owner.receipted(rid or "", spi.Outcome("rejected", reason))
        elif owner is not None:
            if not owner.done():
                owner.set_exception(spi.LinkRefused(reason, text))
        else:
            log.warning("STOMP connection %s: ERROR from %s: %s", self.name, self.peer, reason)

    def peer_text(self) -> str:
        return self.peer or str(self.endpoints[0])

    # -- losing and closing ---------------------------------------------------------------
    def _abort(self, reason: str) -> None:
        sock = self._socket
        if sock is not None and sock.transport is not None:
            self._pending_reason = reason
            sock.transport.abort()

    _pending_reason: str | None = None

    def _socket_lost(self, sock: _Socket, exc: Exception | None) -> None:
        if sock is not self._socket:
            return
        reason = self._pending_reason or (str(exc) if exc else "closed by the peer")
        self._pending_reason = None
        self._drop_socket()
        err = spi.ConnectionLost(f"connection to {self.peer_text()} lost: {reason}")
        if self._connected is not None and not self._connected.done():
            self._connected.set_exception(err)
        receipts = list(self._receipts.items())
        self._receipts.clear()
        for _, owner in receipts:
            if not isinstance(owner, StompSender) and not owner.done():
                owner.set_exception(err)
        for sender in list(self.senders):
            sender.lost(err)
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(reason)

    def _drop_socket(self) -> None:
        self.live = False
        self._out.clear()
        if self._hb_task is not None:
            self._hb_task.cancel()
            self._hb_task = None
        sock = self._socket
        self._socket = None
        if sock is not None and sock.transport is not None:
            sock.transport.abort()

    async def _shutdown(self) -> None:
        if self.live and self._socket is not None:
            rid = f"r-{next(self._ids)}"
            fut: asyncio.Future[None] = self.loop.create_future()
            self._receipts[rid] = fut
            self.send_frame("DISCONNECT", [("receipt", rid)])
            try:
                await asyncio.wait_for(fut, 2.0)
            except (TimeoutError, spi.OutgoingError):
                pass
        self._drop_socket()

    def _give_up(self, error: spi.OutgoingError) -> None:
        for sender in list(self.senders):
            sender.fail(error)
        self.senders.clear()
        for receiver in list(self.receivers.values()):
            receiver.closed = True
        self.receivers.clear()
