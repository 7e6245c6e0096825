"""Sessions and links of an outgoing STOMP connection (`relaymq.spi.outgoing`).

A sender sends each message with a `receipt` header; the RECEIPT settles it
(accepted), an ERROR naming the receipt rejects it, and a connection lost
before either fails it with `ConnectionLost`. At most `window` sends wait for
receipts at once; more (and sends made while disconnected) queue in order.

A receiver is a SUBSCRIBE with `ack:client-individual` (STOMP 1.0: `client`)
and a prefetch of `credit` (`activemq.prefetchSize` for ActiveMQ and RelayMQ,
`prefetch-count` for RabbitMQ): STOMP has no credit frames, so the window is
fixed when the subscription is made and `flow` only grows the local count.
After a reconnection every receiver subscribes again; messages delivered on
the lost connection and not acknowledged are redelivered by the peer.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi import outgoing as spi

from relaymq_stomp.frames import V10, V12
from relaymq_stomp.outgoing.convert import destination_of, message_of, send_frame, stomp_address


class StompConnection(Protocol):
    """What links need of their connection (`connection.StompConnection`)."""

    loop: asyncio.AbstractEventLoop
    live: bool
    version: str
    generation: int
    send_window: int
    options: spi.ConnectOptions
    senders: set[StompSender]
    receivers: dict[str, StompReceiver]

    def name_of(self, dest: Destination) -> str: ...
    def next_id(self, prefix: str) -> str: ...
    def next_receipt(self, owner: StompSender) -> str: ...
    def forget_receipt(self, rid: str) -> None: ...
    def write(self, data: bytes, flush: bool = True) -> None: ...
    def flush(self) -> None: ...
    def send_frame(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> None: ...
    async def request(self, command: str, headers: list[tuple[str, str]]) -> None: ...
    async def wait_open(self, timeout: float | None = None) -> None: ...

log = logging.getLogger("relaymq.stomp.outgoing")


class StompSender:
    """`spi.SenderLink`: SEND frames with receipts."""

    def __init__(self, conn: StompConnection, address: str | None, window: int) -> None:
        self.conn = conn
        self.address = address
        self.destination = stomp_address(address) if address else None
        self.window = window
        self.closed = False
        self._backlog: deque[tuple[Message, asyncio.Future[spi.Outcome],
                                   spi.SettleCallback | None, str | None]] = deque()
        self._waiting: dict[str, tuple[asyncio.Future[spi.Outcome], spi.SettleCallback | None]] = {}

    @property
    def unsettled(self) -> int:
        return len(self._waiting) + len(self._backlog)

    def send(self, message: Message, on_settled: spi.SettleCallback | None = None,
             transaction: str | None = None) -> asyncio.Future[spi.Outcome]:
        """`transaction`: a STOMP transaction from `StompSession.begin` (the RECEIPT
        then says the broker has the send, to apply at COMMIT)."""
        fut: asyncio.Future[spi.Outcome] = self.conn.loop.create_future()
        if self.closed:
            fut.set_exception(spi.LinkRefused("the sender is closed"))
            return fut
        self._backlog.append((message, fut, on_settled, transaction))
        self.pump()
        return fut

    def pump(self) -> None:
        conn = self.conn
        if not conn.live:
            return
        wrote = False
        while self._backlog and len(self._waiting) < self.window:
            message, fut, cb, tx = self._backlog.popleft()
            dest = self.destination
            if dest is None:
                if message.destination is None:
                    self._settle(fut, cb, spi.Outcome("rejected", "a message without a destination"))
                    continue
                dest = conn.name_of(message.destination)
            receipt = conn.next_receipt(self)
            try:
                frame = send_frame(message, dest, conn.version, receipt,
                                   {"transaction": tx} if tx is not None else None)
            except Exception as exc:  # noqa: BLE001 - a message that cannot be written
                conn.forget_receipt(receipt)
                self._settle(fut, cb, spi.Outcome("rejected", f"cannot encode: {exc}"))
                continue
            self._waiting[receipt] = (fut, cb)
            conn.write(frame, flush=False)
            wrote = True
        if wrote:
            conn.flush()

    @staticmethod
    def _settle(fut: asyncio.Future[spi.Outcome], cb: spi.SettleCallback | None,
                result: spi.Outcome | BaseException) -> None:
        if not fut.done():
            if isinstance(result, BaseException):
                fut.set_exception(result)
                fut.exception()  # retrieved: the callback may be all that cares
            else:
                fut.set_result(result)
        if cb is not None:
            try:
                cb(result)
            except Exception:  # noqa: BLE001
                log.exception("settlement callback failed")

    def receipted(self, receipt: str, outcome: spi.Outcome) -> None:
        entry = self._waiting.pop(receipt, None)
        if entry is not None:
            self._settle(entry[0], entry[1], outcome)
        self.pump()

    def lost(self, error: BaseException) -> None:
        waiting = list(self._waiting.values())
        self._waiting.clear()
        for fut, cb in waiting:
            self._settle(fut, cb, spi.ConnectionLost(f"connection lost before a receipt: {error}"))

    def fail(self, error: BaseException) -> None:
        self.closed = True
        self.lost(error)
        while self._backlog:
            _, fut, cb, _tx = self._backlog.popleft()
            self._settle(fut, cb, error)

    async def close(self) -> None:
        self.conn.senders.discard(self)
        self.fail(spi.LinkRefused("the sender was closed"))


class StompDelivery:
    """`spi.Delivery`: one MESSAGE and its ACK/NACK."""

    __slots__ = ("message", "redelivered", "_receiver", "_ack", "_generation", "_sid", "settled")

    def __init__(self, message: Message, redelivered: bool, receiver: StompReceiver,
                 ack: str, generation: int) -> None:
        self.message = message
        self.redelivered = redelivered
        self._receiver = receiver
        self._ack = ack
        self._generation = generation
        self._sid = receiver.sid
        self.settled = False

    def _settle(self, command: str) -> None:
        if self.settled:
            return
        self.settled = True
        self._receiver.settled(self._ack, command, self._generation, self._sid)

    def accept(self) -> None:
        self._settle("ACK")

    def release(self) -> None:
        """STOMP cannot give one message back (NACK dead-letters it on ActiveMQ and
        RelayMQ): the receiver subscribes again, and the peer redelivers every
        message of the old subscription not acknowledged yet."""
        if not self.settled:
            self.settled = True
            self._receiver.recycle(self._sid)

    def reject(self, description: str | None = None) -> None:
        self._settle("NACK")


class StompReceiver:
    """`spi.ReceiverLink`: one SUBSCRIBE, subscribed again after each reconnection."""

    def __init__(self, conn: StompConnection, sid: str, address: str,
                 on_delivery: Callable[[spi.Delivery], Any], credit: int, selector: str | None,
                 subscription_name: str | None, browse: bool) -> None:
        self.conn = conn
        self.sid = sid
        self.address = address
        self.destination = stomp_address(address)
        self.fallback: Destination = destination_of(self.destination)
        self.on_delivery = on_delivery
        self.credit = credit
        self.selector = selector
        self.subscription_name = subscription_name
        self.browse = browse
        self.closed = False

    def subscribe_frame(self) -> tuple[str, list[tuple[str, str]]]:
        conn = self.conn
        h = [("id", self.sid), ("destination", self.destination),
             ("ack", "client" if conn.version == V10 else "client-individual")]
        if self.credit:
            h += [("activemq.prefetchSize", str(self.credit)), ("prefetch-count", str(self.credit))]
        if self.selector:
            h.append(("selector", self.selector))
        if self.subscription_name:
            h += [("activemq.subscriptionName", self.subscription_name),
                  ("durable-subscription-name", self.subscription_name),
                  ("durable", "true"), ("auto-delete", "false")]
        if self.browse:
            h.append(("browser", "true"))
        return "SUBSCRIBE", h

    def on_message(self, headers: dict[str, str], body: bytes) -> None:
        message = message_of(headers, body, self.fallback)
        ack = headers.get("ack") or headers.get("message-id") or ""
        redelivered = headers.get("redelivered", "").lower() == "true"
        delivery = StompDelivery(message, redelivered, self, ack, self.conn.generation)
        try:
            self.on_delivery(delivery)
        except Exception:  # noqa: BLE001 - a failing handler must not kill the connection
            log.exception("on_delivery of receiver %s failed; the message is not acknowledged",
                          self.address)

    def settled(self, ack: str, command: str, generation: int, sid: str) -> None:
        conn = self.conn
        if generation != conn.generation or not conn.live or sid != self.sid:
            return  # delivered on a lost connection or subscription: the peer redelivers it
        if conn.version == V10:
            if command == "ACK":
                conn.send_frame("ACK", [("message-id", ack)])
            return  # STOMP 1.0 has no NACK: an unacknowledged message comes back on reconnect
        if conn.version == V12:
            conn.send_frame(command, [("id", ack)])
        else:
            conn.send_frame(command, [("message-id", ack), ("subscription", self.sid)])

    def recycle(self, sid: str) -> None:
        """Subscribe again (once per loop turn) so unacknowledged messages come back."""
        if sid != self.sid or self.closed or self._recycling:
            return
        self._recycling = True
        self.conn.loop.call_soon(self._recycle)

    _recycling = False

    def _recycle(self) -> None:
        self._recycling = False
        conn = self.conn
        if self.closed:
            return
        old = self.sid
        conn.receivers.pop(old, None)
        self.sid = conn.next_id("sub")
        conn.receivers[self.sid] = self
        if conn.live:
            conn.send_frame("UNSUBSCRIBE", [("id", old)])
            conn.send_frame(*self.subscribe_frame())

    def flow(self, credit: int) -> None:
        self.credit += credit  # STOMP cannot grow a subscription's prefetch once made

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.conn.receivers.pop(self.sid, None)
        if self.conn.live:
            self.conn.send_frame("UNSUBSCRIBE", [("id", self.sid)])


class StompSession:
    """`spi.Session` of a `StompConnection` (STOMP has one session per connection)."""

    def __init__(self, conn: StompConnection) -> None:
        self.conn = conn
        self._links: list[StompSender | StompReceiver] = []

    async def open_sender(self, address: str | None, *, durable: bool = True,
                          capabilities: list[str] | None = None) -> StompSender:
        await self.conn.wait_open()
        sender = StompSender(self.conn, address, self.conn.send_window)
        self.conn.senders.add(sender)
        self._links.append(sender)
        return sender

    async def open_receiver(self, address: str, on_delivery: Callable[[spi.Delivery], Any], *,
                            credit: int = 100, selector: str | None = None,
                            subscription_name: str | None = None, browse: bool = False,
                            capabilities: list[str] | None = None) -> StompReceiver:
        conn = self.conn
        await conn.wait_open()
        if subscription_name and not conn.options.client_id:
            raise spi.LinkRefused("a durable subscription needs a client id (ConnectOptions.client_id)")
        receiver = StompReceiver(conn, conn.next_id("sub"), address, on_delivery, credit,
                                 selector, subscription_name, browse)
        conn.receivers[receiver.sid] = receiver
        self._links.append(receiver)
        try:
            await conn.request(*receiver.subscribe_frame())
        except BaseException:
            conn.receivers.pop(receiver.sid, None)
            raise
        return receiver

    async def begin(self) -> str:
        """Start a STOMP transaction; sends naming it apply at `commit`."""
        conn = self.conn
        await conn.wait_open()
        tx = conn.next_id("tx")
        await conn.request("BEGIN", [("transaction", tx)])
        return tx

    async def commit(self, tx: str) -> None:
        """Commit; returns when the broker's RECEIPT says it is done."""
        await self.conn.request("COMMIT", [("transaction", tx)])

    async def abort(self, tx: str) -> None:
        await self.conn.request("ABORT", [("transaction", tx)])

    async def unsubscribe(self, subscription_name: str) -> None:
        conn = self.conn
        await conn.wait_open()
        await conn.request("UNSUBSCRIBE", [
            ("id", subscription_name), ("activemq.subscriptionName", subscription_name),
            ("durable-subscription-name", subscription_name)])

    async def close(self) -> None:
        for link in self._links:
            await link.close()
        self._links.clear()

