"""One client's AMQP connection on the broker side (sans-IO).

Bytes come in through `feed`; bytes go out through the injected `write`, and
`close_socket` asks the owner to close. In order:

1. the protocol header: SASL (answered by `sasl.SaslServer`) or, when
   allowed, plain AMQP;
2. authentication: ``broker.connect`` (the ``relaymq_authenticate`` hook)
   before the SASL outcome, so a refused client never reaches the AMQP layer;
3. the AMQP layer: proton's engine (`engine.Engine`) takes every byte after
   the SASL outcome; its events drive sessions and links (`links`).

Sends from all links of a connection go through one pipeline so a producer's
messages keep their order even when ``conn.send`` has to wait (flow control,
a store write).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from relaymq.broker.security import ConnectRequest
from relaymq.errors import ClientIdInUse, SecurityError
from relaymq.model.message import Message
from relaymq.outgoing.node import node_id

from relaymq_amqp import engine as pn
from relaymq_amqp import link_handlers
from relaymq_amqp.encode import encode
from relaymq_amqp.engine import Condition, Engine
from relaymq_amqp.frames import ACQUISITION_REFUSED, FrameGuard
from relaymq_amqp.links import ATTACH_ROOM, ConsumerLink, Link, LinkHost, ProducerLink
from relaymq_amqp.options import AmqpOptions
from relaymq_amqp.ranges import range_link, wants_range
from relaymq_amqp.sasl import AMQP_HEADER, AUTH, SASL_HEADER, SCRAM, SYS, SaslError, SaslServer
from relaymq_amqp.transactions import CoordinatorLink
from relaymq_amqp.txstate import kernel_txid, settle_transactional
from relaymq_amqp.types import Described, Symbol, ULong

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker

_FRAME_HEADER: Final = struct.Struct(">IBBH").pack  # size, data offset, type (AMQP), channel
log = logging.getLogger("relaymq.amqp")

SOLE_CONNECTION: Final = "sole-connection-for-container"
#: how long a closing connection's queued transfers may take to route (a producer
#: held by flow control) before the close is answered anyway
CLOSE_DRAIN_S: Final = 5.0
ANONYMOUS_RELAY: Final = "ANONYMOUS-RELAY"


class AmqpConnection(LinkHost):
    """The AMQP protocol for one accepted socket (no socket calls in here)."""

    def __init__(self, broker: Broker, options: AmqpOptions, write: Callable[[bytes], None],
                 close_socket: Callable[[], None], *, remote_address: str | None = None,
                 certificates: list[Any] | None = None, refuse: str | None = None) -> None:
        self.broker = broker
        self.options = options
        self._write = write
        self._close_socket = close_socket
        self.remote_address = remote_address
        self.certificates = certificates or []
        self.refuse_reason = refuse  # e.g. maximumConnections reached: refused at open
        self.loop = asyncio.get_running_loop()
        self.kconn = None
        self.engine = None
        self.guard = FrameGuard(options.max_frame_size)
        self.sasl: SaslServer | None = None
        self._scram: Any = None  # the authentication plugin's SCRAM exchange, while it runs
        self.links: dict[Any, Link] = {}
        self.opened = False
        self.closed = False
        self._state = "header"
        self._pending_input = bytearray()
        self._pumping = False
        self._closing = False  # a close was sent after an error: drop the socket once written
        self.flush_scheduled = False
        self.transactional = False
        self.accepts_only = False
        self.sent_deliveries = {}
        #: bytes went to proton since the events were last all handled
        self._unpumped = False
        self._timer: asyncio.TimerHandle | None = None
        #: transfers (message, link, delivery, txn-id or None) and discharges (None,
        #: None, (coordinator, delivery), (txn-id, fail)) in arrival order
        self._sendq: deque[tuple[Message | None, ProducerLink | None, Any, Any]] = deque()
        #: active AMQP transactions of this connection -> the link that declared them
        self.transactions = {}
        self.coordinators: dict[Any, CoordinatorLink] = {}  # proton link -> controller
        #: links served by another plugin (`link_handlers`): proton link -> IncomingLink
        self.extension_links: dict[Any, Any] = {}
        #: durable transfers routed and waiting for their store write, in routing order
        self._store_waits: deque[tuple[asyncio.Future[None], ProducerLink, Any]] = deque()
        self._watched: asyncio.Future[None] | None = None  # the store removal last watched
        #: consumer links holding accepted outcomes for the kernel (see `acks_due`)
        self._acking: list[ConsumerLink] = []
        self._sending = False
        self._send_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._open_timer: asyncio.TimerHandle | None = self.loop.call_later(
            options.connect_timeout_s, self._open_timeout)

    # -- bytes in ------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        if self.closed:
            return
        state = self._state
        if state == "amqp":
            self._push(data)
            self._pump()
            if not self.flush_scheduled:
                self.want_flush()
            return
        try:
            if state == "header":
                self._header(data)
            elif state == "sasl":
                self._sasl(data)
            elif state == "auth":
                self._pending_input += data
        except SaslError as exc:
            log.info("AMQP client %s: %s; closing", self.remote_address, exc)
            self._abort()

    def _header(self, data: bytes) -> None:
        buf = self._pending_input
        buf += data
        if len(buf) < 8 and (SASL_HEADER.startswith(bytes(buf)) or AMQP_HEADER.startswith(bytes(buf))):
            return
        received = bytes(buf)
        self._pending_input = bytearray()
        head = received[:8]
        if head == SASL_HEADER:
            self._state = "sasl"
            mechanisms = self.options.mechanisms
            if (self.certificates and "EXTERNAL" not in mechanisms
                    and self.broker.extensions.get("certificate-login") is not None):
                # a verified client certificate and a broker that logs in by certificate
                mechanisms = ("EXTERNAL", *mechanisms)
            if self.broker.extensions.get("sasl-scram") is not None:
                mechanisms = (*mechanisms, *(m for m in SCRAM if m not in mechanisms))
            self.sasl = SaslServer(mechanisms)
            self._sasl(received)
        elif head == AMQP_HEADER and self.options.allow_non_sasl:
            self._authenticate(None, None, received)
        else:
            # Protocol header mismatch: answer with the header we speak, then close.
            log.info("AMQP client %s sent %r, not an AMQP header; closing",
                     self.remote_address, head)
            self._write(SASL_HEADER if head == AMQP_HEADER else AMQP_HEADER)
            self._abort()

    def _sasl(self, data: bytes) -> None:
        assert self.sasl is not None
        out, creds, leftover = self.sasl.feed(data)
        if out:
            self._write(out)
        if creds is not None:
            if creds.mechanism not in self.sasl.mechanisms or (
                    creds.mechanism == "EXTERNAL" and not self.certificates):
                self._write(self.sasl.outcome(False, AUTH))
                self._abort()
                return
            if creds.mechanism in SCRAM:
                self._scram_step(creds.mechanism, creds.response or b"", leftover)
                return
            self._authenticate(creds.username, creds.password, leftover, sasl=True)

    # -- SCRAM (the exchange itself is the authentication plugin's) --------------------
    def _scram_step(self, mechanism: str, response: bytes, leftover: bytes) -> None:
        if self._scram is None:
            provider: Any = self.broker.extensions.get("sasl-scram")
            try:
                self._scram = provider.exchange(mechanism, self.remote_address)
            except Exception:  # noqa: BLE001 - no provider or mechanism: refused
                self._sasl_refused()
                return
            self.spawn(self._scram_first(response))
        else:
            self._state = "auth"
            self._pending_input = bytearray(leftover)
            self.spawn(self._scram_final(response))

    async def _scram_first(self, response: bytes) -> None:
        assert self._scram is not None and self.sasl is not None
        try:
            challenge = await self._scram.first(response)
        except Exception as exc:  # noqa: BLE001 - SecurityError or a malformed message
            log.info("AMQP client %s refused: %s", self.remote_address, exc)
            self._sasl_refused()
            return
        if not self.closed:
            self._write(self.sasl.challenge(challenge))

    async def _scram_final(self, response: bytes) -> None:
        assert self._scram is not None
        try:
            additional, proof = await self._scram.final(response)
        except Exception as exc:  # noqa: BLE001
            log.info("AMQP client %s refused: %s", self.remote_address, exc)
            self._sasl_refused()
            return
        await self._connect(proof.username, None, True, proof, additional)

    def _sasl_refused(self) -> None:
        if self.sasl is not None and not self.closed:
            self._write(self.sasl.outcome(False, AUTH))
        self._abort()

    def _authenticate(self, username: str | None, password: str | None, leftover: bytes,
                      sasl: bool = False) -> None:
        self._state = "auth"
        self._pending_input = bytearray(leftover)
        self.spawn(self._connect(username, password, sasl))

    async def _connect(self, username: str | None, password: str | None, sasl: bool,
                       proof: object = None, additional: bytes | None = None) -> None:
        ok, code = True, AUTH
        if self.refuse_reason is None:
            request = ConnectRequest(username=username, password=password, transport="amqp",
                                     remote_address=self.remote_address,
                                     certificates=list(self.certificates), sasl=proof)
            try:
                self.kconn = await self.broker.connect(request)
                self.kconn.on_close_request = self._close_requested
            except SecurityError as exc:
                log.info("AMQP client %s refused: %s", self.remote_address, exc)
                ok = False
            except Exception:  # noqa: BLE001 - report a system error, keep the broker up
                log.exception("authenticating AMQP client %s failed", self.remote_address)
                ok, code = False, SYS
        if self.closed:
            await self._release_kernel()
            return
        if sasl:
            assert self.sasl is not None
            self._write(self.sasl.outcome(ok, code, additional))
        if not ok:
            if not sasl:  # no SASL outcome to carry the refusal: refuse at open
                self.refuse_reason = "amqp:unauthorized-access"
            else:
                self._abort()
                return
        self._start_amqp()

    def _start_amqp(self) -> None:
        o = self.options
        self.engine = Engine(server=True, max_frame_size=o.max_frame_size,
                             channel_max=o.channel_max, idle_timeout_ms=o.idle_timeout_ms,
                             trace=o.trace)
        self.guard = FrameGuard(o.max_frame_size)
        self._state = "amqp"
        data, self._pending_input = bytes(self._pending_input), bytearray()
        if data:
            self._push(data)
        self._process()

    def _push(self, data: bytes) -> None:
        """Hand checked bytes to proton; a bad frame closes the connection."""
        engine = self.engine
        assert engine is not None
        if self._closing:
            return
        guard = self.guard
        good = guard.feed(data)
        if good == len(data):
            # events of earlier bytes not handled yet: what they said must hold too
            self.accepts_only = guard.accepts_only and (self.accepts_only or not self._unpumped)
            self._unpumped = True
            engine.push(data)
            return
        self.accepts_only = False
        if good:
            engine.push(data[:good])
        condition, description = self.guard.error or ("amqp:decode-error", "bad frame")
        log.info("AMQP client %s: %s (%s); closing", self.remote_address, description, condition)
        self._fail(Condition(condition, description))

    # -- the engine loop ---------------------------------------------------------------
    def _pump(self) -> None:
        """Handle collected events now; output waits for the flush this loop turn,
        so the writes of many reads and settlements become one."""
        engine = self.engine
        if engine is None or self._pumping:
            return
        self._pumping = True
        try:
            engine.pump(self)
            self._unpumped = self.accepts_only = False
            if self._acking:
                self._ack_accepted()
        except Exception:  # noqa: BLE001 - a bug in one connection must not stop the broker
            log.exception("AMQP connection %s failed; closing it", self.remote_address)
            self._pumping = False
            self._fail(Condition("amqp:internal-error", "the broker failed to process a frame"))
        finally:
            self._pumping = False

    def _process(self) -> None:
        """Handle collected events, then write what proton produced."""
        engine = self.engine
        if engine is None or self._pumping:
            return
        self._pumping = True
        try:
            engine.pump(self)
            self._unpumped = self.accepts_only = False
            if self._acking:
                self._ack_accepted()
        except Exception:  # noqa: BLE001 - a bug in one connection must not stop the broker
            log.exception("AMQP connection %s failed; closing it", self.remote_address)
            self._pumping = False
            self._fail(Condition("amqp:internal-error", "the broker failed to process a frame"))
            return
        finally:
            self._pumping = False
        out = engine.output()
        while out:
            self._write(out)
            out = engine.output()
        if self._closing or engine.head_closed or engine.closed:
            self._close_now()
        elif self._timer is None and self.opened:
            self._arm_timer()

    def acks_due(self, link: ConsumerLink) -> None:
        self._acking.append(link)

    def _ack_accepted(self) -> None:
        """The accepted outcomes of the events just handled go to the kernel, one
        call per consumer link (a read of many dispositions is one queue call)."""
        links, self._acking = self._acking, []
        for link in links:
            link.flush_acks()

    def want_flush(self) -> None:
        """Output is waiting (a delivery, a settlement): write it this loop turn."""
        if not self.flush_scheduled and not self.closed:
            self.flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self.flush_scheduled = False
        if not self.closed:
            self._process()

    def _arm_timer(self) -> None:
        assert self.engine is not None
        now = pn.monotonic_ms()
        deadline = self.engine.tick(now)
        if deadline:
            self._timer = self.loop.call_later(max(deadline - now, 1) / 1000.0, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.closed or self.engine is None:
            return
        self._arm_timer()
        self._process()

    # -- events (called by Engine.pump) -----------------------------------------------
    def on_connection_remote_open(self) -> None:
        engine = self.engine
        assert engine is not None
        self.opened = True
        if self._open_timer is not None:
            self._open_timer.cancel()
            self._open_timer = None
        props: dict[Any, Any] = {
            Symbol("product"): "RelayMQ",
            Symbol("version"): _version(),
            Symbol("queue-prefix"): "queue://",
            Symbol("topic-prefix"): "topic://",
        }
        container = engine.remote_container or ""
        refusal = self._refusal()
        if refusal is None and self.kconn is not None and container:
            if SOLE_CONNECTION in engine.remote_desired_capabilities:
                try:
                    self.broker.claim_client_id(self.kconn, container)
                except ClientIdInUse as exc:
                    refusal = Condition("amqp:invalid-field", str(exc),
                                        {Symbol("invalid-field"): Symbol("container-id")})
            else:
                # Durable subscriptions are named by container id; without the
                # sole-connection capability the id need not be unique (Artemis).
                self.kconn.client_id = container
        if refusal is not None:
            props[Symbol("amqp:connection-establishment-failed")] = True
        # Artemis answers with its node id as container id, on every connection:
        # a peer's federation knows this broker by it (loops, no-local)
        engine.open(container_id=node_id(self.broker),
                    offered_capabilities=[ANONYMOUS_RELAY, SOLE_CONNECTION],
                    properties=props)
        if refusal is not None:
            log.info("AMQP client %s (%s) refused: %s", self.remote_address, container, refusal)
            engine.close(refusal)

    def _refusal(self) -> Condition | None:
        reason = self.refuse_reason
        if reason is None:
            return None
        if reason == "amqp:unauthorized-access":
            return Condition(reason, "authentication failed")
        return Condition("amqp:resource-limit-exceeded", reason)

    def on_connection_remote_close(self) -> None:
        engine = self.engine
        assert engine is not None
        cond = engine.remote_condition
        if cond is not None:
            log.info("AMQP client %s closed with %s", self.remote_address, cond)
        self._close_links()
        if not engine.local_closed:
            # Answer once the kernel connection is released: a client that waits for
            # the reply (JMS Connection.close()) finds its temporary destinations gone.
            self.spawn(self._answer_close())

    async def _answer_close(self) -> None:
        """The client closed: route what it sent before closing, release its kernel
        connection (temporary destinations, unacknowledged deliveries), then send
        the close reply."""
        try:
            task = self._send_task
            if task is not None and not task.done():
                await asyncio.wait({task}, timeout=CLOSE_DRAIN_S)
            await self._release_kernel()
        finally:
            engine = self.engine
            if engine is not None and not engine.local_closed:
                engine.close()

    def on_session_remote_open(self, session: Any) -> None:
        pn.session_open(session, self.options.session_capacity)

    def on_session_remote_close(self, session: Any) -> None:
        for link in [lk for lk in self.links.values() if lk.session == session]:
            link.close()
            self._forget(link)
        for coordinator in [c for c in self.coordinators.values() if c.session == session]:
            coordinator.close()  # its transactions roll back
            self._forget_coordinator(coordinator)
        for plink, extension in list(self.extension_links.items()):
            if pn.link_session(plink) == session:
                del self.extension_links[plink]
                extension._on_detach(False)
                pn.link_free(plink)
        pn.session_close(session)

    def on_link_remote_open(self, link: Any) -> None:
        if link in self.links or self.kconn is None:
            return
        is_sender = bool(pn.link_is_sender(link))
        caps = self.guard.attaches.pop((pn.link_name(link), is_sender), None) \
            if self.guard.attaches else None
        known = self.extension_links.get(link)
        if known is not None:  # the peer's answer to a link the broker attached (`initiated`)
            known._on_remote_open(caps)
            return
        name_size = len(pn.link_name(link).encode())
        limit = self.engine.remote_max_frame_size if self.engine is not None else 0
        if 0 < limit < name_size + ATTACH_ROOM:
            # every answer to this attach, a refusal too, repeats the name
            self._fail(Condition("amqp:connection:framing-error",
                                 f"a link name of {name_size} bytes: no attach answering it fits in "
                                 f"this connection's max-frame-size of {limit} bytes"))
            return
        if is_sender or pn.remote_target(link).kind != 3:
            extension = link_handlers.dispatch(self, link, caps)
            if extension is None and is_sender and wants_range(pn.remote_source(link)):
                extension = range_link(self, link)  # a sequence-range read (ranges.py)
            if extension is not None:
                self.extension_links[link] = extension
                return
        if is_sender:
            consumer = ConsumerLink(self, link)
            self.links[link] = consumer
            self.spawn(consumer.attach())
        elif pn.remote_target(link).kind == 3:  # a transaction coordinator
            if link not in self.coordinators:
                self.transactional = True
                coordinator = CoordinatorLink(self, link)
                self.coordinators[link] = coordinator
                coordinator.attach()
        else:
            producer = ProducerLink(self, link)
            self.links[link] = producer
            producer.attach()

    def on_link_remote_close(self, link: Any, closed: bool) -> None:
        handler = self.links.get(link)
        if handler is None:
            coordinator = self.coordinators.get(link)
            if coordinator is not None:
                coordinator.on_remote_close(closed)
                self._forget_coordinator(coordinator)
                return
            extension = self.extension_links.pop(link, None)
            if extension is not None:
                extension._on_detach(closed)
                pn.link_free(link)
            return
        if not handler.closed:
            handler.on_remote_close(closed)
        self._forget(handler)

    def on_link_flow(self, link: Any) -> None:
        if self.guard.acquisitions and self._refuse_acquisition(link):
            return
        handler = self.links.get(link)
        if handler is not None:
            handler.on_flow()
        else:
            extension = self.extension_links.get(link)
            if extension is not None:
                extension._on_flow()

    def _refuse_acquisition(self, link: Any) -> bool:
        """The flow of `link` asked for transactional acquisition (see frames.py):
        refuse that consumer link with `amqp:not-implemented` before the flow's
        credit reaches its consumer; its unsettled deliveries return to their queues."""
        name = pn.link_name(link)
        if name not in self.guard.acquisitions or not pn.link_is_sender(link):
            return False
        self.guard.acquisitions.discard(name)
        condition = Condition("amqp:not-implemented", ACQUISITION_REFUSED)
        handler = self.links.get(link)
        log.info("AMQP client %s: link %s asked for transactional acquisition; refused",
                 self.remote_address, name)
        if isinstance(handler, ConsumerLink) and not handler.closed:
            if handler.consumer is None:  # still attaching
                handler.refuse(condition, source=True)
            else:
                handler.close(condition)
        elif handler is None:  # not a consumer link of ours: refuse the connection
            self._fail(condition)
        self.want_flush()
        return True

    def on_delivery(self, link: Any, delivery: Any) -> None:
        handler = self.links.get(link)
        if handler is not None:
            handler.on_delivery(delivery)
        else:
            coordinator = self.coordinators.get(link)
            if coordinator is not None:
                coordinator.on_delivery(delivery)
            else:
                extension = self.extension_links.get(link)
                if extension is not None:
                    extension._on_delivery(delivery)

    def on_transport_error(self) -> None:
        assert self.engine is not None
        cond = self.engine.transport_condition
        log.info("AMQP connection %s: protocol error %s", self.remote_address, cond)

    def on_transport_closed(self) -> None:
        pass

    # -- links -----------------------------------------------------------------------
    def link_closed(self, link: Link) -> None:
        """A link handler closed its end; proton's link is freed when both ends are."""
        if pn.link_remote_closed(link.link):
            self._forget(link)

    def _forget(self, link: Link) -> None:
        if self.links.pop(link.link, None) is not None:
            pn.link_free(link.link)

    def extension_closed(self, extension: Any) -> None:
        """A link handler closed its end (`link_handlers.IncomingLink.close`)."""
        if pn.link_remote_closed(extension.pn) and self.extension_links.pop(extension.pn, None) is not None:
            pn.link_free(extension.pn)

    def coordinator_closed(self, coordinator: CoordinatorLink) -> None:
        if pn.link_remote_closed(coordinator.link):
            self._forget_coordinator(coordinator)

    def _forget_coordinator(self, coordinator: CoordinatorLink) -> None:
        if self.coordinators.pop(coordinator.link, None) is not None:
            pn.link_free(coordinator.link)

    def _close_links(self) -> None:
        for link in list(self.links.values()):
            if not link.closed:
                link.closed = True
                link.detached()
        self.links.clear()
        for coordinator in list(self.coordinators.values()):
            if not coordinator.closed:
                coordinator.closed = True
                coordinator.detached()
        self.coordinators.clear()
        if self.extension_links:
            extensions = list(self.extension_links.values())
            self.extension_links.clear()
            for extension in extensions:
                extension._on_detach(False)

    # -- sends ------------------------------------------------------------------------
    def submit(self, message: Message, link: ProducerLink, delivery: Any,
               txn: bytes | None = None) -> None:
        """Queue a received message for ``conn.send`` (in arrival order); `txn` is
        the AMQP transaction a transactional transfer named."""
        self._sendq.append((message, link, delivery, txn))
        self._start_sending()

    def submit_control(self, link: CoordinatorLink, delivery: Any, txn: bytes,
                       fail: bool) -> None:
        """Queue a discharge behind the transfers that arrived before it."""
        self._sendq.append((None, None, (link, delivery), (txn, fail)))
        self._start_sending()

    def _start_sending(self) -> None:
        if not self._sending:
            self._sending = True
            task = self._send_task = self.loop.create_task(self._send_loop())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send_loop(self) -> None:
        """Send queued messages in order; settle each as ``conn.send`` returns.
        (The accepted case is written out here: it runs once per message.)"""
        q = self._sendq
        kconn = self.kconn
        try:
            if kconn is None:
                return
            submit = kconn.submit
            update = pn.delivery_update
            settle = pn.delivery_settle
            accepted = pn.ACCEPTED
            while q and not self._closing:
                message, link, d, txn = q.popleft()
                try:
                    if txn is not None or message is None or link is None:
                        await self._transactional(message, link, d, txn)
                        continue
                    try:
                        stored = await submit(message)
                    except Exception as exc:  # noqa: BLE001 - refused sends are settled rejected
                        link.sent(d, exc)
                        continue
                    if stored is not None:
                        # Routed in order; settle when the store has it, while the next
                        # transfers are routed (the store merges their syncs).
                        self._settle_when_stored(stored, link, d)
                        continue
                    link.inflight -= 1
                    if link.closed:
                        continue
                    if d is not None:
                        update(d, accepted)
                        settle(d)
                    if link.credit + link.inflight <= link.low_water:
                        link._top_up()
                except Exception as exc:  # noqa: BLE001 - never leave the pipeline stuck
                    self._pipeline_failed(exc)
        finally:
            self._sending = False
            if self.closed or self._closing:
                q.clear()
            elif q:  # stopped early (cancelled): what is queued goes on now, not
                self.loop.call_soon(self._start_sending)  # when the next transfer comes
        self.want_flush()

    def _pipeline_failed(self, exc: Exception) -> None:
        """A step of the send pipeline raised where no refusal was expected (not a
        refused send: those are settled `rejected`). Whether the transfer's delivery
        was settled is not known, so the connection is not trusted any more: it
        closes with `amqp:internal-error` and the reason. Its transfers not settled
        yet were not accepted (the client sends them again), and the messages its
        consumers hold go back to their queues for redelivery."""
        log.error("AMQP send pipeline of %s failed; closing the connection",
                  self.remote_address, exc_info=exc)
        self._fail(Condition("amqp:internal-error",
                             f"the broker could not process a transfer: "
                             f"{type(exc).__name__}: {exc}"))

    async def _transactional(self, message: Message | None, link: ProducerLink | None, d: Any,
                             txn: Any) -> None:
        """A transactional transfer (held by its transaction) or a discharge."""
        if message is None or link is None:
            coordinator, delivery = d
            txn_id, fail = txn
            await coordinator.discharge(delivery, txn_id, fail)
            return
        kconn = self.kconn
        assert kconn is not None
        try:
            await kconn.submit(message, kernel_txid(txn))
        except Exception as exc:  # noqa: BLE001 - refused sends are settled rejected
            link.sent(d, exc)
            return
        link.inflight -= 1
        if link.closed:
            return
        if d is not None:
            settle_transactional(d, txn)
        if link.credit + link.inflight <= link.low_water:
            link._top_up()

    def _settle_when_stored(self, stored: Awaitable[None], link: ProducerLink, d: Any) -> None:
        """Settle a durable transfer once its store write completed (or failed).

        Writes complete in the order they were routed, and the store completes a
        whole group commit at once, so one callback settles every transfer whose
        write is done (not one scheduled callback per message)."""
        fut = asyncio.ensure_future(stored)
        waits = self._store_waits
        waits.append((fut, link, d))
        if len(waits) == 1:
            fut.add_done_callback(self._stored)

    def _stored(self, _done: asyncio.Future[None]) -> None:
        waits = self._store_waits
        while waits:
            fut, link, d = waits[0]
            if not fut.done():
                fut.add_done_callback(self._stored)
                break
            waits.popleft()
            error: BaseException | None
            if fut.cancelled():
                error = ConnectionError("the send was cancelled")
            else:
                error = fut.exception()
            try:
                link.sent(d, error)
            except Exception:  # noqa: BLE001 - the other waiting transfers are still settled
                log.exception("settling a stored transfer on link %s failed", link.name)
        self.want_flush()

    def watch(self, fut: Awaitable[None]) -> None:
        """Log a failed store removal (an ack the store could not write). The
        acks of one loop turn share one removal: watch it once, not per ack."""
        if isinstance(fut, asyncio.Future) and fut is not self._watched:
            self._watched = fut
            fut.add_done_callback(_log_failure)

    def unsubscribe_later(self, name: str) -> None:
        kconn = self.kconn
        if kconn is None:
            return

        async def unsubscribe() -> None:
            try:
                await kconn.unsubscribe(name)
            except Exception as exc:  # noqa: BLE001
                log.info("unsubscribing %r failed: %s", name, exc)

        self.spawn(unsubscribe())

    # -- lifecycle -------------------------------------------------------------------------
    def spawn(self, coro: Any) -> None:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("AMQP connection %s task failed", self.remote_address,
                      exc_info=task.exception())
        if not self.closed:
            self._process()

    def _open_timeout(self) -> None:
        self._open_timer = None
        if not self.opened and not self.closed:
            log.info("AMQP client %s did not finish SASL/open within %.1fs; dropping it",
                     self.remote_address, self.options.connect_timeout_s)
            self._abort()

    def _fail(self, condition: Condition) -> None:
        """Close the connection with `condition`: send close, then drop the socket."""
        engine = self.engine
        if engine is None or engine.local_closed:
            self._abort()
            return
        self._close_links()
        if not self.opened:  # an error before open: open first, so close is legal
            engine.open(container_id=node_id(self.broker))
            if engine.remote_uninit:
                self._close_before_remote_open(condition)
                return
        engine.close(condition)
        self._closing = True
        if not self._pumping:
            self._process()

    def _close_before_remote_open(self, condition: Condition) -> None:
        """Proton sends its close only after the peer's open. When the guard refused
        that very open (a hostile first frame), write proton's open, then the close
        with `condition` ourselves, and hang up."""
        engine = self.engine
        assert engine is not None
        out = engine.output()
        while out:
            self._write(out)
            out = engine.output()
        error = Described(ULong(0x1D), [Symbol(condition.name), condition.description])
        body = encode(Described(ULong(0x18), [error]))
        self._write(_FRAME_HEADER(8 + len(body), 2, 0, 0) + body)
        self._closing = True
        self._close_now()

    def close(self, condition: Condition | None = None) -> None:
        """Close from the broker side (connector stopping)."""
        if self.closed:
            return
        if self.engine is not None and self.opened:
            self._fail(condition or Condition("amqp:connection:forced", "the broker is stopping"))
        else:
            self._abort()

    def _close_requested(self, reason: str) -> None:
        """Management closes this connection (`broker.management.close_connection`)."""
        self.close(Condition("amqp:connection:forced", reason))

    def _close_now(self) -> None:
        if not self.closed:
            self._abort()

    def _abort(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._close_socket()

    def connection_lost(self) -> None:
        """The socket is gone: release everything this connection held."""
        self.closed = True
        for h in (self._open_timer, self._timer):
            if h is not None:
                h.cancel()
        self._open_timer = self._timer = None
        self._close_links()
        self._sendq.clear()
        if self.engine is not None:
            self.engine.close_tail()
            self.engine.free()
            self.engine = None
        self.spawn(self._release_kernel())

    async def _release_kernel(self) -> None:
        kconn, self.kconn = self.kconn, None
        if kconn is not None:
            await kconn.close()


@functools.cache
def _version() -> str:
    try:
        from importlib.metadata import version

        return version("relaymq-amqp")
    except Exception:  # noqa: BLE001
        return "0"


def _log_failure(fut: asyncio.Future[None]) -> None:
    # The store writer logged the failed write once; this names the connection's part.
    if not fut.cancelled() and fut.exception() is not None:
        log.info("storing an acknowledgement failed: %s", fut.exception())


