"""The STOMP protocol session: frames in, kernel calls, frames out.

Sans-IO: the session never touches a socket. It receives parsed `Frame`s from
the server (one at a time, in order, awaited: that is what keeps per-producer
FIFO) and emits bytes through the injected `SessionContext.write`. The server
tells it when written bytes went out (`flushed`), which is when `auto`
deliveries are acknowledged: acking on dispatch instead would let a queue push
its whole backlog into a socket buffer in one go.

Errors follow ActiveMQ: a `StompError` from a handler becomes an ERROR frame
and the connection stays; a `ProtocolError` also closes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from time import time_ns  # inline on the SEND path: epoch ms without a call
from typing import TYPE_CHECKING, Final

from relaymq.broker.broker import Broker  # at run time: SessionContext's field type (below)
from relaymq.broker.security import ConnectRequest
from relaymq.dispatch.consumer import Consumer, NackMode
from relaymq.errors import (
    ClientIdInUse,
    RelayMQError,
    SecurityError,
    SubscriptionInUse,
)
from relaymq.model.destination import Destination, InvalidDestination
from relaymq.model.message import now_millis
from relaymq.selector import InvalidSelector, Selector

from . import frames as F
from .config import StompOptions
from .destinations import DestinationMapper
from .errors import ProtocolError, StompError
from .frames import V10, V12, Frame, encode_frame, escape, unescape_headers
from .mapping import SendCache, message_from_send, stamp_user
from .subscription import ACK_MODES, AUTO, CLIENT, CLIENT_INDIVIDUAL, Subscription, SubscriptionHost

if TYPE_CHECKING:
    from relaymq.broker.connection import ClientConnection

log = logging.getLogger("relaymq.stomp")

#: wildcard subscriptions being extended to a new queue (kept referenced until done)
_background: set[asyncio.Task[None]] = set()

#: commands whose handler writes the RECEIPT itself (CONNECTED carries it for CONNECT)
#: persistent SENDs of one connection waiting for the store before reading pauses
MAX_UNSTORED: Final = 1024
_OWN_RECEIPT: Final = frozenset({F.CONNECT, F.STOMP, F.SUBSCRIBE, F.DISCONNECT})


@dataclass(slots=True)
class SessionContext:
    """What a session needs from its server, as one object.

    Compiled, the dataclass decorator is given the field types as objects, so a
    field's class is imported at run time, never only under TYPE_CHECKING
    (tools/lint_compiled.py)."""

    broker: Broker
    options: StompOptions
    #: queue bytes for the client (buffered; the server flushes once per loop turn)
    write: Callable[[bytes], None]
    #: flush what was written, then close the connection
    close: Callable[[], None]
    #: the negotiated heart-beat: (ms between our sends, ms the client may be silent)
    heartbeat: Callable[[int, int], None]
    transport: str = "stomp"
    remote_address: str | None = None
    #: the TLS client certificate (``getpeercert()`` form) when the connector asked for one
    certificates: list[object] = field(default_factory=list)


class StompSession(SubscriptionHost):
    def __init__(self, ctx: SessionContext) -> None:
        self.ctx = ctx
        self.write = ctx.write
        self.version = V10
        self.conn: ClientConnection | None = None
        self.mapper: DestinationMapper = None  # type: ignore[assignment]  # set on CONNECT
        self._stamp_user: str | None = None  # populateJMSXUserID, set on CONNECT
        self.subs: dict[str, Subscription] = {}
        self._by_num: dict[int, Subscription] = {}
        self._nums = 0
        #: auto-ack deliveries written but not yet flushed to the socket
        self.auto_acks: list[tuple[Subscription, int]] = []
        #: NACKs inside a transaction, applied on COMMIT
        self._tx_nacks: dict[str, list[tuple[Subscription, int]]] = {}
        #: output held back while a SUBSCRIBE with a receipt is set up (the RECEIPT goes first)
        self._held: list[bytes] | None = None
        self.closing = False
        self.detached = False  # the socket is gone; no new subscriptions
        self._closed = False
        self._id_prefix_escaped = ""
        self._send_cache = SendCache()  # the last SEND's headers and what they made
        #: client-individual ACKs taken by `ack_now` and not yet applied (`apply_acks`),
        #: all of `_ack_consumer`, ascending: a read's ACKs become one kernel call
        self._acks: list[int] = []
        self._ack_consumer: Consumer | None = None
        #: SENDs waiting for their store write: (write, receipts of its SENDs), in order
        self._store_waits: deque[tuple[asyncio.Future[None], list[str | None]]] = deque()
        self._unstored = 0
        self._handlers: dict[str, Callable[[Frame], Awaitable[None]]] = {
            F.CONNECT: self._connect, F.STOMP: self._connect, F.SEND: self._send,
            F.SUBSCRIBE: self._subscribe, F.UNSUBSCRIBE: self._unsubscribe,
            F.ACK: self._ack, F.NACK: self._nack, F.BEGIN: self._begin,
            F.COMMIT: self._commit, F.ABORT: self._abort, F.DISCONNECT: self._disconnect,
        }

    # -- entry points used by the server ------------------------------------------------
    async def handle(self, frame: Frame) -> None:
        """Process one frame completely (including its receipt) or answer ERROR."""
        if self.closing:
            return
        cmd = frame.command
        receipt = None
        conn = self.conn
        if cmd == "SEND" and conn is not None and not frame.escaped:
            # The producer's hot path, without the generic dispatch below.
            h = frame.headers
            receipt = h.get("receipt")
            try:
                txid = h.get("transaction")
                number = str(next(conn.message_numbers))  # the id, plain and escaped
                mid = conn.message_id_prefix + number
                eid = self._id_prefix_escaped + number
                message = message_from_send(h, frame.body, self.mapper, mid,
                                            time_ns() // 1_000_000, eid, True, self._send_cache)
                if self._stamp_user is not None:
                    stamp_user(message, self._stamp_user)
                stored = await conn.submit(message, txid)
            except Exception as exc:  # noqa: BLE001 - mapped to ERROR frames in _failed
                self._failed(exc, cmd, receipt)
                return
            if stored is not None:  # a persistent message: the receipt means stored
                self._after_store(stored, receipt)
                if self._unstored >= MAX_UNSTORED:  # bound what one producer has in flight
                    await asyncio.wait([self._store_waits[0][0]])
            elif self._store_waits:  # answered after the SENDs before it
                self._store_waits[-1][1].append(receipt)
                self._unstored += 1
            elif receipt is not None and not self.closing:
                self.write(_receipt(receipt, self.version))
            return
        if cmd == "ACK" and conn is not None and self.ack_now(frame):
            self.apply_acks()
            return
        if self._store_waits:
            await self.stored()  # frames are answered in order
        try:
            handler = self._handlers.get(cmd)
            if handler is None:
                raise ProtocolError(f"Unknown STOMP action: {cmd[:40]}",
                                    "STOMP commands: " + ", ".join(sorted(F.CLIENT_COMMANDS)))
            if frame.escaped and self.version != V10 and cmd != F.CONNECT and cmd != F.STOMP:
                frame.headers = unescape_headers(frame.headers, self.version)
            receipt = frame.headers.get("receipt")
            if self.conn is None and cmd != F.CONNECT and cmd != F.STOMP:
                if cmd == F.DISCONNECT:
                    self._finish(receipt)
                    return
                raise StompError("Not connected", f"send CONNECT before {cmd}")
            await handler(frame)
            if receipt is not None and cmd not in _OWN_RECEIPT and not self.closing:
                self.write(_receipt(receipt, self.version))
        except Exception as exc:  # noqa: BLE001 - one client's frame must not hurt others
            self._failed(exc, cmd, receipt)

    def _after_store(self, stored: Awaitable[None], receipt: str | None) -> None:
        """A SEND waits for its store write: answer it when the write is done.

        The kernel stores the SENDs of one loop turn (of every connection) in one
        write and completes writes in order, so one callback per write answers
        every SEND of it, in order; later frames are not held up meanwhile."""
        fut = asyncio.ensure_future(stored)
        waits = self._store_waits
        self._unstored += 1
        if waits and waits[-1][0] is fut:
            waits[-1][1].append(receipt)
            return
        waits.append((fut, [receipt]))
        fut.add_done_callback(self._stored)

    def _stored(self, _done: asyncio.Future[None]) -> None:
        waits = self._store_waits
        version = self.version
        while waits:
            fut, receipts = waits[0]
            if not fut.done():
                break
            waits.popleft()
            self._unstored -= len(receipts)
            error: BaseException | None = None
            if fut.cancelled():
                error = ConnectionError("the send was cancelled")
            else:
                error = fut.exception()
            try:
                if error is not None:
                    for receipt in receipts:
                        self._failed(error, F.SEND, receipt)  # type: ignore[arg-type]
                    if all(r is None for r in receipts):
                        self._failed(error, F.SEND, None)  # type: ignore[arg-type]
                elif not self.closing:
                    for receipt in receipts:
                        if receipt is not None:
                            self.write(_receipt(receipt, version))
            except Exception:  # noqa: BLE001 - the later writes' SENDs are still answered
                log.exception("answering stored SENDs from %s failed", self.ctx.remote_address)

    async def stored(self) -> None:
        """Wait until every SEND handled so far is stored and answered."""
        while self._store_waits:
            fut = self._store_waits[-1][0]
            if not fut.done():
                await asyncio.wait([fut])  # (a failed write is the SENDs' own ERROR)
            await asyncio.sleep(0)  # let the done callback answer

    def _failed(self, exc: Exception, cmd: str, receipt: str | None) -> None:
        if isinstance(exc, StompError):
            self.error(exc, receipt)
        elif isinstance(exc, (RelayMQError, InvalidSelector, InvalidDestination)):
            self.error(StompError(str(exc), type(exc).__name__), receipt)
        else:
            log.error("STOMP %s from %s failed", cmd, self.ctx.remote_address, exc_info=exc)
            self.error(ProtocolError(f"internal error: {type(exc).__name__}", str(exc)), receipt)

    def error(self, exc: StompError, receipt: str | None = None) -> None:
        """Send an ERROR frame; close the connection when the error is fatal."""
        if self.closing:
            return
        headers = {"message": exc.message}
        if receipt is not None:
            headers["receipt-id"] = receipt
        headers.update(exc.headers)
        headers["content-type"] = "text/plain"
        self.write(encode_frame(F.ERROR, headers, exc.detail.encode(), self.version))
        if exc.fatal:
            log.info("closing STOMP connection from %s: %s", self.ctx.remote_address, exc.message)
            self.closing = True
            self.auto_acks.clear()
            self.ctx.close()

    def flushed(self) -> None:
        """Written frames reached the socket: acknowledge the `auto` deliveries among them."""
        acks = self.auto_acks
        if not acks or self.closing or self._held is not None:
            return  # (held deliveries are not written yet)
        self.auto_acks = []
        # one kernel call per run of one subscription's deliveries (usually all of them)
        i, n = 0, len(acks)
        while i < n:
            sub, did = acks[i]
            i += 1
            ids = [did]
            while i < n and acks[i][0] is sub:
                ids.append(acks[i][1])
                i += 1
            consumer = sub.consumer
            if consumer is not None and not consumer.closed:
                consumer.ack_many(ids)  # (ids it no longer holds are skipped)

    def detach_consumers(self) -> None:
        """The client is gone: close every subscription (unacknowledged deliveries
        return to their destinations); SUBSCRIBEs still queued are ignored."""
        self.detached = True
        self.apply_acks()  # ACKs already read are applied, not returned with the rest
        conn = self.conn
        subs, self.subs = self.subs, {}
        self._by_num.clear()
        if conn is None:
            return
        for sub in subs.values():
            for part in sub.all_parts():
                if part.consumer is not None and not part.consumer.closed:
                    conn.close_consumer(part.consumer)

    async def close(self) -> None:
        """The socket is gone: return unacknowledged deliveries, end the kernel connection."""
        self.closing = True
        self.auto_acks.clear()
        if self._closed:
            return
        self._closed = True
        conn, self.conn = self.conn, None
        if conn is not None:
            await conn.close()

    def _close_requested(self, reason: str) -> None:
        """Management closes this connection (`broker.management.close_connection`)."""
        self.error(ProtocolError(reason, "the broker's management closed this connection"))

    def subscription_closed(self, sub: Subscription, reason: str) -> None:
        owner = self.subs.get(sub.id)
        if owner is not None and owner.wildcard is not None and sub in owner.parts:
            owner.parts.remove(sub)  # one of the matching queues was deleted
            self._by_num.pop(sub.num, None)
            return
        if owner is not None and (owner is sub or sub in owner.parts):
            self._drop(owner)
            self.error(StompError(f"subscription {sub.id} was closed by the broker", reason))

    def _drop(self, sub: Subscription) -> None:
        """Forget a subscription and close its consumers (every part of a composite one)."""
        del self.subs[sub.id]
        conn = self.conn
        for part in sub.all_parts():
            self._by_num.pop(part.num, None)
            consumer = part.consumer
            if consumer is not None and not consumer.closed and conn is not None:
                conn.close_consumer(consumer)

    # -- CONNECT ---------------------------------------------------------------------------
    async def _connect(self, frame: Frame) -> None:
        if self.conn is not None:
            raise StompError("Already connected")
        h = frame.headers
        accepted = [v.strip() for v in h.get("accept-version", V10).split(",")]
        version = next((v for v in reversed(F.SUPPORTED_VERSIONS) if v in accepted), None)
        if version is None:
            raise ProtocolError("Supported protocol versions are 1.0,1.1,1.2",
                                f"the client accepts {h.get('accept-version')}",
                                {"version": ",".join(F.SUPPORTED_VERSIONS)})
        opts = self.ctx.options
        send_ms, recv_ms = self._heartbeat(h.get("heart-beat"), opts.default_heart_beat)
        request = ConnectRequest(
            username=h.get("login"), password=h.get("passcode"),
            client_id=h.get("client-id") or None, transport=self.ctx.transport,
            remote_address=self.ctx.remote_address, certificates=list(self.ctx.certificates),
        )
        try:
            conn = await self.ctx.broker.connect(request)
        except SecurityError as exc:
            raise ProtocolError(str(exc) or "Authentication failed",
                                "the broker's authentication refused this login") from None
        except ClientIdInUse as in_use:  # each clause its own name: compiled, one
            raise ProtocolError(str(in_use), "InvalidClientIDException") from None  # type each
        except RelayMQError as refused:
            raise ProtocolError(str(refused), type(refused).__name__) from None
        if self.closing:  # the socket went away while we authenticated
            await conn.close()
            return
        self.conn = conn
        conn.on_close_request = self._close_requested
        self._id_prefix_escaped = escape(conn.message_id_prefix, V12)  # ids on 1.2 MESSAGEs
        #: populateJMSXUserID: the user every SEND of this connection is stamped with
        self._stamp_user = conn.user if conn.populate_user_id else None
        self.version = version
        self.mapper = DestinationMapper(conn, version)
        # ActiveMQ: `session` is the client id (the connection id without one); a
        # `receipt` (or `request-id`) on CONNECT is answered on CONNECTED itself
        headers = {"version": version, "session": conn.client_id or conn.id,
                   "server": opts.server, "heart-beat": f"{send_ms},{recv_ms}"}
        request_id = h.get("request-id") or h.get("receipt")
        if request_id is not None:
            headers["response-id"] = request_id
            headers["receipt-id"] = request_id
        self.write(encode_frame(F.CONNECTED, headers, b"", version, content_length=False))
        self.ctx.heartbeat(send_ms, recv_ms)

    @staticmethod
    def _heartbeat(header: str | None, default: tuple[int, int]) -> tuple[int, int]:
        """Return (server send interval, client silence allowed) in ms.

        We can send as often as the client wants (`cy`) and accept the client's
        own rate (`cx`); the CONNECTED header says so (`cy,cx`), like ActiveMQ."""
        if header is None:
            cx, cy = default
        else:
            try:
                cx, cy = (int(x.strip()) for x in header.split(","))
                if cx < 0 or cy < 0:
                    raise ValueError
            except ValueError:
                raise ProtocolError("invalid heart-beat header",
                                    f"heart-beat:{header!r}; expected two numbers, e.g. 10000,10000"
                                    ) from None
        return cy, cx

    # -- SEND ------------------------------------------------------------------------------
    async def _send(self, frame: Frame) -> None:
        """SEND with escaped headers (the common case takes the fast path in `handle`)."""
        conn = self.conn
        assert conn is not None
        headers = frame.headers
        txid = headers.get("transaction")  # removed from the headers with the other reserved ones
        message = message_from_send(headers, frame.body, self.mapper, conn.new_message_id(),
                                    now_millis())
        if self._stamp_user is not None:
            stamp_user(message, self._stamp_user)
        await conn.send(message, txid)

    # -- SUBSCRIBE / UNSUBSCRIBE -------------------------------------------------------------
    async def _subscribe(self, frame: Frame) -> None:
        conn = self.conn
        assert conn is not None
        if self.detached:
            return
        h = frame.headers
        text = h.get("destination")
        dest = self.mapper.parse(text)
        sid = h.get("id") or text
        assert sid is not None
        if sid in self.subs:
            raise StompError(f"subscription id {sid!r} is already in use on this connection")
        ack_mode = h.get("ack", AUTO)
        if ack_mode not in ACK_MODES:
            raise StompError(f"invalid ack mode {ack_mode!r}", "use auto, client or client-individual")
        browser = _flag(h, "browser")
        durable = h.get("activemq.subscriptionName") or h.get("durable-subscription-name")
        # a composite destination, or a wildcard queue, is consumed by one kernel
        # consumer per part, all under this subscription id (ActiveMQ: one consumer)
        wildcard = dest.is_queue and dest.is_wildcard and not dest.is_composite
        if (dest.is_composite or wildcard) and (browser or durable is not None):
            raise StompError("browsing and durable subscriptions need a single destination",
                             f"{text} is a composite or wildcard destination")
        if wildcard:
            targets = [d for d in self.ctx.broker.management.matching_queues(dest)
                       if not d.is_wildcard]
        else:
            targets = dest.composite_parts() if dest.is_composite else [dest]
        if durable is not None:
            if dest.is_queue:
                raise StompError("durable subscriptions are for topics",
                                 f"{text} is a queue; subscribe to a /topic/ destination")
            if not conn.client_id:
                raise StompError("a durable subscription needs a client-id",
                                 "set client-id on CONNECT")
        if browser and not dest.is_queue:
            raise StompError("browsing needs a queue", f"{text} is not a queue")
        prefetch = _int_header(h, "activemq.prefetchSize")
        if prefetch is not None and prefetch <= 0:
            prefetch = 1  # STOMP has no pull; ActiveMQ treats 0 as "one at a time" too
        priority = _int_header(h, "activemq.priority") or 0
        parts = [self._part(sid, text or "", ack_mode, browser, durable) for _ in targets]
        if wildcard:
            sub = self._part(sid, text or "", ack_mode, browser, durable)
            sub.wildcard = dest
            sub.parts = parts
        else:
            sub = parts[0]
            sub.parts = parts[1:]
        sub.options = {
            "selector": h.get("selector"), "prefetch": prefetch,
            "exclusive": _flag(h, "activemq.exclusive"), "browser": browser,
            "durable_name": durable, "no_local": _flag(h, "activemq.noLocal"),
            "priority": priority, "name": f"stomp:{conn.id}:{sid}",
            "selector_string_conversion": True,
        }
        self.subs[sid] = sub
        # ActiveMQ answers a SUBSCRIBE's receipt before the first MESSAGE of the
        # subscription: deliveries made while subscribing wait behind the RECEIPT
        receipt = h.get("receipt")
        held: list[bytes] = []
        if receipt is not None:
            self._held = held
            self.write = held.append
        try:
            selector = h.get("selector")
            if wildcard and selector and selector.strip():  # even when no queue matches yet
                Selector.compile(selector, string_conversion=True)
            for part, target in zip(parts, targets, strict=True):
                await self._attach(conn, sub, part, target)
        except BaseException:
            self._release(held, None)
            if self.subs.get(sid) is sub:
                self._drop(sub)
            raise
        self._release(held, receipt)

    def _part(self, sid: str, text: str, ack_mode: str, browser: bool,
              durable: str | None) -> Subscription:
        self._nums += 1
        part = Subscription(self, sid, self._nums, text, ack_mode, browser, durable)
        self._by_num[part.num] = part
        return part

    @staticmethod
    async def _attach(conn: ClientConnection, sub: Subscription, part: Subscription,
                      target: Destination) -> None:
        consumer = await conn.subscribe(
            target, on_message=part.on_message,
            on_browse_end=part.on_browse_end if part.browser else None, **sub.options)
        part.consumer = consumer
        consumer.on_closed = part.on_closed

    def queue_added(self, queue: Destination) -> None:
        """A queue was created: wildcard subscriptions it matches start consuming it."""
        if self.closing or self.detached or self.conn is None:
            return
        for sub in list(self.subs.values()):
            wildcard = sub.wildcard
            if wildcard is not None and wildcard.matches(queue):
                task = asyncio.get_running_loop().create_task(self._add_part(sub, queue))
                _background.add(task)
                task.add_done_callback(_background.discard)

    async def _add_part(self, sub: Subscription, queue: Destination) -> None:
        conn = self.conn
        if conn is None or self.closing or self.subs.get(sub.id) is not sub or any(
                p.consumer is not None and p.consumer.destination == queue for p in sub.parts):
            return
        part = self._part(sub.id, sub.destination_text, sub.ack_mode, False, None)
        sub.parts.append(part)
        try:
            await self._attach(conn, sub, part, queue)
        except Exception:  # noqa: BLE001 - e.g. not authorized to read this queue
            log.info("STOMP wildcard subscription %s does not consume %s", sub.id, queue,
                     exc_info=True)
            sub.parts.remove(part)
            self._by_num.pop(part.num, None)
            return
        if self.subs.get(sub.id) is not sub or self.closing:  # gone while we subscribed
            conn.close_consumer(part.consumer)  # type: ignore[arg-type]

    def _release(self, held: list[bytes], receipt: str | None) -> None:
        """End holding output: the RECEIPT (if any), then what was held, in order."""
        if self._held is not held:
            return
        self._held = None
        self.write = self.ctx.write
        if receipt is not None and not self.closing:
            self.write(_receipt(receipt, self.version))
        for data in held:
            self.write(data)

    async def _unsubscribe(self, frame: Frame) -> None:
        conn = self.conn
        assert conn is not None
        h = frame.headers
        durable = h.get("activemq.subscriptionName") or h.get("durable-subscription-name")
        if durable is not None:
            # ActiveMQ: with the name, UNSUBSCRIBE only deletes the durable subscription,
            # which needs its consumer gone first ("Durable consumer is in use" otherwise)
            try:
                await conn.unsubscribe(durable)
            except SubscriptionInUse as exc:
                raise StompError(str(exc), "UNSUBSCRIBE the subscription id first, then "
                                 "UNSUBSCRIBE with activemq.subscriptionName") from None
            return
        sid = h.get("id")
        sub = self.subs.get(sid) if sid is not None else None
        if sub is None and sid is None and h.get("destination") is not None:
            sub = self.subs.get(h["destination"])  # STOMP 1.0: by destination
        if sub is None:
            raise StompError(f"no subscription {sid or h.get('destination')!r} on this connection")
        self._drop(sub)

    # -- ACK / NACK --------------------------------------------------------------------------
    def _find(self, h: dict[str, str]) -> tuple[Subscription, int]:
        ack_id = h.get("id")
        if ack_id is not None:
            num, sep, did = ack_id.partition("-")
            if sep and num.isdigit() and did.isdigit():
                sub = self._by_num.get(int(num))
                if sub is not None and (sub.browser or sub.ack_mode == AUTO or sub.holds(int(did))):
                    return sub, int(did)
        mid = h.get("message-id") or ack_id
        if mid is not None:
            sid = h.get("subscription")
            subs = [self.subs[sid]] if sid is not None and sid in self.subs else self.subs.values()
            for owner in subs:
                for sub in owner.all_parts():
                    did2 = sub.find_message(mid)
                    if did2 is not None:
                        return sub, did2
        what = ack_id if ack_id is not None else mid
        if what is None:
            raise StompError("ACK/NACK needs an 'id' header (STOMP 1.2) or 'message-id'")
        raise StompError(f"Unknown ack id {what!r}",
                         "the message was already acknowledged, or never delivered on this "
                         "connection")

    def ack_now(self, frame: Frame) -> bool:
        """The consumer's hot path, called for each ACK frame without a coroutine:
        a STOMP 1.2 ACK of one held client-individual delivery, outside a
        transaction. Without a receipt it is taken at once and applied with the
        other ACKs of the same read: the caller calls `apply_acks` before it
        handles any other frame and when the read is done. A receipt is answered
        once the removal is stored (after the answers of earlier frames, in
        order); later frames are not held up meanwhile. False (nothing done) for
        anything else, which `handle` takes the general way."""
        if frame.escaped or self.closing:
            return False
        h = frame.headers
        if "transaction" in h:
            return False
        ack_id = h.get("id")
        if ack_id is None:
            return False
        num, sep, did_text = ack_id.partition("-")
        if not sep or not num.isdigit() or not did_text.isdigit():
            return False
        sub = self._by_num.get(int(num))
        if sub is None or sub.ack_mode != CLIENT_INDIVIDUAL or sub.browser or sub.msgids:
            return False
        consumer = sub.consumer
        if consumer is None or self.conn is None:
            return False
        did = int(did_text)
        acks = self._acks
        if acks and (consumer is not self._ack_consumer or did <= acks[-1]):
            self.apply_acks()  # another consumer, or not ascending (maybe a repeat)
            acks = self._acks
        if not consumer.holds(did):
            return False
        acks.append(did)
        self._ack_consumer = consumer
        receipt = h.get("receipt")
        if receipt is None:
            return True  # nothing promised: the removal is stored in the background
        done = self.apply_acks()
        if done is not None:
            self._after_store(done, receipt)  # the receipt promises the ack is durable
        elif self._store_waits:  # nothing to store, but answered after earlier frames
            self._store_waits[-1][1].append(receipt)
            self._unstored += 1
        else:
            self.write(_receipt(receipt, self.version))
        return True

    def apply_acks(self) -> Awaitable[None] | None:
        """Apply the ACKs `ack_now` took (one kernel call); returns their store
        removal when one is being written."""
        acks = self._acks
        if not acks:
            return None
        consumer = self._ack_consumer
        self._acks = []
        self._ack_consumer = None
        if consumer is None or consumer.closed:
            return None
        return consumer.ack_many(acks)

    async def _ack(self, frame: Frame) -> None:
        conn = self.conn
        assert conn is not None
        h = frame.headers
        sub, did = self._find(h)
        txid = h.get("transaction")
        txn = conn.transaction(txid) if txid is not None else None
        if sub.browser or sub.ack_mode == AUTO or sub.consumer is None:
            return  # nothing to settle: browsed copies and auto deliveries
        consumer = sub.consumer
        if sub.ack_mode == CLIENT:
            if sub.msgids:
                sub.forget([e.message.message_id for d, e in consumer.inflight.items()  # type: ignore[misc]
                            if d <= did])
            done = consumer.ack_cumulative(did, txn)
        else:
            if sub.msgids:
                sub.msgids.pop(consumer.inflight[did].message.message_id, None)  # type: ignore[arg-type]
            done = consumer.ack(did, txn)
        if done is not None and "receipt" in h:
            # The receipt promises the ack is durable. `done` is shared by every ack
            # of this loop turn: shielded, so that cancelling this connection's work
            # (shutdown, a lost client's backlog) does not cancel it for the others.
            await asyncio.shield(done)

    async def _nack(self, frame: Frame) -> None:
        conn = self.conn
        assert conn is not None
        if self.version == V10:  # ActiveMQ refuses it too: NACK came with STOMP 1.1
            raise StompError("NACK received but connection is in v1.0 mode.",
                             "connect with accept-version:1.1 or 1.2 to NACK")
        h = frame.headers
        sub, did = self._find(h)
        txid = h.get("transaction")
        if txid is not None:
            conn.transaction(txid)  # unknown transaction -> ERROR
            self._tx_nacks.setdefault(txid, []).append((sub, did))
            return
        self._apply_nack(sub, did)

    @staticmethod
    def _apply_nack(sub: Subscription, did: int) -> None:
        consumer = sub.consumer
        if sub.browser or sub.ack_mode == AUTO or consumer is None or not consumer.holds(did):
            return
        if sub.msgids:
            sub.msgids.pop(consumer.inflight[did].message.message_id, None)  # type: ignore[arg-type]
        consumer.nack(did, NackMode.POISON)

    # -- transactions ------------------------------------------------------------------------
    def _txid(self, frame: Frame) -> str:
        txid = frame.headers.get("transaction")
        if not txid:
            raise StompError(f"{frame.command} needs a 'transaction' header")
        return txid

    async def _begin(self, frame: Frame) -> None:
        assert self.conn is not None
        self.conn.begin(self._txid(frame))

    async def _commit(self, frame: Frame) -> None:
        assert self.conn is not None
        txid = self._txid(frame)
        await self.conn.commit(txid)
        for sub, did in self._tx_nacks.pop(txid, ()):
            self._apply_nack(sub, did)

    async def _abort(self, frame: Frame) -> None:
        assert self.conn is not None
        txid = self._txid(frame)
        self.conn.rollback(txid)
        self._tx_nacks.pop(txid, None)

    # -- DISCONNECT --------------------------------------------------------------------------
    async def _disconnect(self, frame: Frame) -> None:
        self._finish(frame.headers.get("receipt"))

    def _finish(self, receipt: str | None) -> None:
        if receipt is not None:
            self.write(_receipt(receipt, self.version))
        self.closing = True
        self.ctx.close()


def _receipt(receipt_id: str, version: str) -> bytes:
    return encode_frame(F.RECEIPT, {"receipt-id": receipt_id}, b"", version, content_length=False)


def _flag(h: dict[str, str], name: str) -> bool:
    return h.get(name, "").strip().lower() == "true"


def _int_header(h: dict[str, str], name: str) -> int | None:
    raw = h.get(name)
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise StompError(f"invalid '{name}' header", f"{raw!r} is not an integer") from None
