"""The asyncio side: a listening connector and one `asyncio.Protocol` per socket.

Reading: `data_received` parses the bytes and handles the frames at once, in
order, each to completion (so a producer's messages reach the kernel in the
order it sent them). Most frames complete without suspending and cost no task
and no loop turn; the first that has to wait (producer flow control, a store
write) continues in a task, and the frames behind it queue up until it is
done. Past `max_pending_frames` queued frames the socket stops being read
until the backlog is gone: TCP then pushes back on the producer.

Writing: frames are appended to a buffer that is flushed once per loop turn, so
a burst of MESSAGE frames costs one `send()` call. When the transport's buffer
passes its high-water mark asyncio pauses us; `auto`-ack deliveries are then not
acknowledged until it resumes, which bounds what one slow consumer can pin.

Heart-beats: one timer per direction, re-armed lazily (no per-byte timer work).
"""

from __future__ import annotations

import asyncio
import logging
import select
import ssl
from collections import deque
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Final, cast

from relaymq.broker.eager import Resume, start
from relaymq.model.destination import Destination
from relaymq.spi.transport import ConnectorContext

from .codec import FrameParser
from .config import StompOptions
from .errors import FrameError, ProtocolError
from .frames import CLIENT_COMMANDS, Frame
from .session import SessionContext, StompSession
from .wildcards import NewQueues

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker

log = logging.getLogger("relaymq.stomp")

#: seconds the frames a vanished client sent are still given to reach the kernel
LOST_BACKLOG_GRACE: Final = 5.0
#: seconds between checks whether a client whose socket is not being read hung up
PROBE_INTERVAL: Final = 0.5
_HUNG_UP: Final = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR


def _peer_gone(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, _HUNG_UP)
    return any(ev & _HUNG_UP for _fd, ev in poller.poll(0))


class StompConnector:
    """Listens for STOMP clients on `stomp://`, `stomp+nio://` or `stomp+ssl://`."""

    def __init__(self, context: ConnectorContext) -> None:
        self.context = context
        self.scheme = context.uri.scheme
        # the kernel hands connectors its Broker (the SPI names it as a BrokerHandle)
        self.broker = cast("Broker", context.broker)
        self.options = StompOptions.from_context(context)
        self.ssl: ssl.SSLContext | None = context.ssl_context()
        self.connections: set[StompProtocol] = set()
        self._server: asyncio.Server | None = None
        self._address = ""
        self._new_queues = NewQueues(self._queue_added)

    async def start(self) -> None:
        uri = self.context.uri
        loop = asyncio.get_running_loop()
        port = uri.port if uri.port is not None else (61614 if self.ssl else 61613)
        self._server = await loop.create_server(
            lambda: StompProtocol(self), uri.host, port, ssl=self.ssl, reuse_address=True,
            backlog=512,
        )
        # getattr: uvloop's Server.sockets is a list where typeshed says tuple, and
        # compiled code checks the declared type
        sock = getattr(self._server, "sockets")[0].getsockname()  # noqa: B009
        self._address = f"{sock[0]}:{sock[1]}"
        # wildcard queue subscriptions take in matching queues created later
        self.broker.plugins.register(self._new_queues, description=f"{self.scheme} connector")

    def _queue_added(self, destination: Destination) -> None:
        """A matching queue for wildcard subscriptions: tell every session."""
        for protocol in list(self.connections):
            session = protocol.session
            if session is not None:
                session.queue_added(destination)

    async def stop(self) -> None:
        pm = self.broker.plugins.pm
        if pm.is_registered(self._new_queues):
            pm.unregister(self._new_queues)
        if self._server is not None:
            self._server.close()
        conns = list(self.connections)
        for p in conns:
            p.abort()
        if conns:
            # each teardown returns unacknowledged deliveries and closes its kernel connection
            await asyncio.wait([p.closed for p in conns], timeout=10)
        self._server = None

    @property
    def address(self) -> str:
        return self._address


def StompTransportFactory(context: ConnectorContext) -> StompConnector:  # noqa: N802 - entry point
    """Entry point for `stomp`, `stomp+nio` and `stomp+ssl` in `relaymq.transports`."""
    return StompConnector(context)


class StompProtocol(asyncio.Protocol):
    """One client socket: parser, session, output buffer, heart-beat timers."""

    def __init__(self, connector: StompConnector) -> None:
        self.connector = connector
        self.options = connector.options
        self.loop = asyncio.get_running_loop()
        self.parser = FrameParser(self.options.limits, CLIENT_COMMANDS)
        self.transport: asyncio.Transport | None = None
        self.session: StompSession | None = None
        self._frames: deque[Frame | FrameError] = deque()
        self._task: asyncio.Task[None] | None = None
        self._out: list[bytes] = []  # frames written this loop turn, sent by _flush
        self._flush_scheduled = False
        self._write_paused = False
        self._read_paused = False
        self._closing = False  # no more frames are processed
        self._lost = False
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self._last_read = self.loop.time()
        self._last_write = self._last_read
        self._send_every = 0.0
        self._recv_within = 0.0
        self._connect_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._recv_timer: asyncio.TimerHandle | None = None
        self._probe_timer: asyncio.TimerHandle | None = None

    # -- asyncio callbacks ----------------------------------------------------------------
    def connection_made(self, base: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, base)  # a stream socket (TCP or TLS)
        self.transport = transport
        opts = self.options
        transport.set_write_buffer_limits(high=opts.write_buffer_high)
        peer = transport.get_extra_info("peername")
        remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        conns = self.connector.connections
        if opts.max_connections and len(conns) >= opts.max_connections:
            log.warning("refusing STOMP connection from %s: maximumConnections=%d reached",
                        remote, opts.max_connections)
            transport.abort()
            self._lost = True
            return
        conns.add(self)
        self.session = StompSession(SessionContext(
            broker=self.connector.broker, options=opts, write=self.write, close=self.close,
            heartbeat=self._start_heartbeat, transport=self.connector.scheme,
            remote_address=remote, certificates=_peer_certificates(transport),
        ))
        if opts.connect_timeout_ms:
            self._connect_timer = self.loop.call_later(opts.connect_timeout_ms / 1000.0,
                                                       self._connect_timeout)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._last_read = self.loop.time()
        try:
            frames: list[Frame | FrameError] = self.parser.feed(data)  # type: ignore[assignment]
        except FrameError as exc:
            frames = [*self.parser.error_frames, exc]
            self.transport.pause_reading()  # type: ignore[union-attr]
        if not frames:
            return
        if self._task is None:
            self._run(frames)
            return
        self._frames.extend(frames)  # a frame is waiting in the kernel; keep the order
        if not self._read_paused and len(self._frames) >= self.options.max_pending_frames:
            self._read_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]
            self._probe_timer = self.loop.call_later(PROBE_INTERVAL, self._probe)

    def _probe(self) -> None:
        """While reading is paused a closed socket goes unnoticed (no read sees the
        EOF), and the kernel connection would keep its deliveries and client id:
        ask the OS whether the peer hung up."""
        self._probe_timer = None
        if not self._read_paused or self._lost or self.transport is None:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None and _peer_gone(sock.fileno()):
            log.info("STOMP client %s went away while its sends were held by flow control",
                     self.session.ctx.remote_address if self.session else "?")
            self.transport.abort()
            return
        self._probe_timer = self.loop.call_later(PROBE_INTERVAL, self._probe)

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        # Frames already read are still processed (a producer that sent and hung up
        # expects its messages delivered); only their answers go nowhere.
        self._lost = True
        self._cancel_timers()
        self.connector.connections.discard(self)
        self._out = []
        if self.session is not None:
            self.session.auto_acks.clear()
            # Nobody reads deliveries any more: give them back now, not after the
            # backlog (which may be waiting for memory those deliveries hold).
            self.session.detach_consumers()
        if self._task is None:
            self.loop.create_task(self._teardown())
        else:
            # The processing task tears down when the backlog is done; a backlog
            # that flow control holds longer than this was never accepted anyway.
            self.loop.call_later(LOST_BACKLOG_GRACE, self._task.cancel)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.session is not None and not self._lost:
            self.session.flushed()

    # -- processing ----------------------------------------------------------------------
    def _run(self, frames: list[Frame | FrameError]) -> None:
        """Handle one read's frames right here, eagerly: when none of them suspends
        (the usual SENDs and ACKs) this costs no task and no loop turn. If one does
        (flow control, a store write), the rest of the read continues in a task and
        the frames of later reads wait in `_frames` until it is done."""
        coro = self._handle_frames(frames)
        finished, waiting = start(coro)
        if not finished:
            self._task = self.loop.create_task(self._process(coro, waiting))

    async def _handle_frames(self, frames: list[Frame | FrameError]) -> None:
        session = self.session
        assert session is not None
        i, n = 0, len(frames)
        try:
            while i < n:
                if self._closing:
                    return
                item = frames[i]
                i += 1
                if item.__class__ is FrameError:
                    session.error(item)  # type: ignore[arg-type]
                    return
                frame = cast(Frame, item)
                if frame.command == "ACK" and session.ack_now(frame):
                    continue  # a consumer's ACK: taken without a coroutine
                session.apply_acks()  # the ACKs before this frame come first
                await session.handle(frame)
        finally:
            session.apply_acks()  # the read's ACKs, as one kernel call

    async def _process(self, coro: Coroutine[Any, Any, None], waiting: Any) -> None:
        session = self.session
        assert session is not None
        frames = self._frames
        try:
            await Resume(coro, waiting)
            while frames and not self._closing:
                item = frames[0]
                if isinstance(item, FrameError):
                    session.error(item)
                    break
                frame = cast(Frame, frames.popleft())
                if frame.command == "ACK" and session.ack_now(frame):
                    continue
                session.apply_acks()
                await session.handle(frame)
        finally:
            session.apply_acks()
            self._task = None
            if self._lost:
                await self._teardown()
            elif self._read_paused and not self._closing:
                self._read_paused = False
                self.transport.resume_reading()  # type: ignore[union-attr]

    async def _teardown(self) -> None:
        try:
            if self.session is not None:
                await self.session.close()
        except Exception:  # noqa: BLE001
            log.exception("closing STOMP session failed")
        finally:
            if not self.closed.done():
                self.closed.set_result(None)

    # -- output --------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self._lost:
            return
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._lost or not self._out:
            return
        out, self._out = self._out, []
        data = out[0] if len(out) == 1 else b"".join(out)  # one copy, not one per frame
        self.transport.write(data)  # type: ignore[union-attr]
        self._last_write = self.loop.time()
        if not self._write_paused and self.session is not None:
            self.session.flushed()

    def close(self) -> None:
        """Flush, then close (after an ERROR that ends the connection, or DISCONNECT)."""
        self._closing = True
        self._frames.clear()
        if self._lost:
            return
        self._flush()
        self.transport.close()  # type: ignore[union-attr]

    def abort(self) -> None:
        """Broker shutdown: drop the socket; `closed` completes after the teardown."""
        self._closing = True
        self._frames.clear()
        if self._task is not None:
            self._task.cancel()  # e.g. a send held by flow control: it was never accepted
        if self.transport is not None and not self._lost:
            self.transport.abort()

    # -- heart-beats and timeouts ------------------------------------------------------------
    def _cancel_timers(self) -> None:
        for t in (self._connect_timer, self._send_timer, self._recv_timer, self._probe_timer):
            if t is not None:
                t.cancel()
        self._connect_timer = self._send_timer = self._recv_timer = self._probe_timer = None

    def _connect_timeout(self) -> None:
        self._connect_timer = None
        session = self.session
        if session is not None and session.conn is None and not self._lost:
            session.error(ProtocolError("no CONNECT frame within "
                                        f"{self.options.connect_timeout_ms} ms"))

    def _start_heartbeat(self, send_ms: int, recv_ms: int) -> None:
        self._cancel_timers()
        if send_ms > 0:
            self._send_every = send_ms / 1000.0
            self._send_timer = self.loop.call_later(self._send_every, self._send_tick)
        if recv_ms > 0:
            self._recv_within = recv_ms / 1000.0 * self.options.hb_grace_multiplier
            self._recv_timer = self.loop.call_later(self._recv_within, self._recv_tick)

    def _send_tick(self) -> None:
        self._send_timer = None
        if self._lost or self._closing:
            return
        idle = self.loop.time() - self._last_write
        if idle >= self._send_every * 0.9 and not self._out:
            self.transport.write(b"\n")  # type: ignore[union-attr]
            self._last_write = self.loop.time()
            idle = 0.0
        self._send_timer = self.loop.call_later(max(self._send_every - idle, 0.001),
                                                self._send_tick)

    def _recv_tick(self) -> None:
        self._recv_timer = None
        if self._lost or self._closing:
            return
        silent = self.loop.time() - self._last_read
        if silent >= self._recv_within:
            log.info("STOMP client %s silent for %.1f s; closing",
                     self.session.ctx.remote_address if self.session else "?", silent)
            if self.session is not None:
                self.session.error(ProtocolError(
                    "heart-beat timeout", f"nothing received for {silent:.3f} s"))
            else:
                self.transport.abort()  # type: ignore[union-attr]
            return
        self._recv_timer = self.loop.call_later(self._recv_within - silent, self._recv_tick)


def _peer_certificates(transport: asyncio.BaseTransport) -> list[object]:
    """The verified client certificate of a TLS connection (needClientAuth or
    wantClientAuth on the connector), for certificate login."""
    cert = transport.get_extra_info("peercert")
    return [cert] if cert else []
