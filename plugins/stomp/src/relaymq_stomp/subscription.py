"""One STOMP subscription: renders the kernel's deliveries as MESSAGE frames and
finds deliveries again from ACK/NACK headers.

The `ack` header is `<subscription number>-<delivery id>`: opaque to the client,
but it lets an ACK find its delivery without a per-message table. STOMP 1.0/1.1
clients ack by `message-id`, so their client-ack subscriptions also keep
`message-id -> delivery id` for the deliveries they hold (a 1.2 client that
acks by message-id anyway is served by a scan of its unacknowledged deliveries).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from relaymq.dispatch.consumer import Consumer, Delivery, NackMode
from relaymq.model.destination import Destination

from .destinations import DestinationMapper
from .frames import V10, V12, escape
from .mapping import ENCODING, render_block

log = logging.getLogger("relaymq.stomp")

AUTO: Final = "auto"
CLIENT = "client"
CLIENT_INDIVIDUAL = "client-individual"
ACK_MODES = (AUTO, CLIENT, CLIENT_INDIVIDUAL)


class SubscriptionHost:
    """What a subscription needs of the session it belongs to (`StompSession` is
    one): the negotiated version and destination mapper, where frames go, the
    auto-ack list, and where a broker-side close is reported. A base class rather
    than a back-reference to the session, so this module stays below it (and the
    compiled build still calls it natively)."""

    version: str
    mapper: DestinationMapper
    #: queue bytes for the client
    write: Callable[[bytes], None]
    #: auto-ack deliveries written but not yet flushed to the socket
    auto_acks: list[tuple[Subscription, int]]

    def subscription_closed(self, sub: Subscription, reason: str) -> None:
        raise NotImplementedError


class Subscription:
    __slots__ = ("session", "id", "num", "destination_text", "ack_mode", "consumer",
                 "browser", "durable_name", "_head", "msgids", "_track", "_auto", "_v12",
                 "_dest", "_line", "parts", "wildcard", "options")

    def __init__(self, session: SubscriptionHost, sid: str, num: int, destination_text: str,
                 ack_mode: str, browser: bool, durable_name: str | None) -> None:
        self.session = session
        self.id = sid
        self.num = num
        self.destination_text = destination_text
        self.ack_mode = ack_mode
        self.browser = browser
        self.durable_name = durable_name
        self.consumer: Consumer | None = None
        self._head = f"MESSAGE\nsubscription:{escape(sid, session.version)}\nack:{num}-".encode()
        #: message-id -> delivery id, for client-ack subscriptions (1.0/1.1 ACK by message-id)
        self.msgids: dict[str, int] = {}
        self._track = ack_mode != AUTO and not browser and session.version != V12
        self._auto = ack_mode == AUTO and not browser
        self._v12 = session.version == V12
        self._dest: object = None  # the last destination rendered, and its header line
        self._line = b""
        #: the other parts of a composite destination: one kernel consumer each, all
        #: under this subscription's id (each with its own number in `ack` headers)
        self.parts: list[Subscription] = []
        #: a wildcard queue: every part is one matching queue (this one has no consumer)
        self.wildcard: Destination | None = None
        #: the SUBSCRIBE's consumer options, for parts added later
        self.options: dict[str, Any] = {}

    # -- kernel -> client ------------------------------------------------------------------
    def on_message(self, delivery: Delivery) -> None:
        """Write one MESSAGE frame; called synchronously by the queue's dispatch."""
        session = self.session
        m = delivery.message
        did = delivery.id
        try:
            block = m.encoded if m.encoding == ENCODING else None
            if block is None or (not self._v12 and _needs_render(block, session.version)):
                block = render_block(m, session.version)
            dest = m.destination
            if dest is self._dest:
                line = self._line
            else:
                line = self._line = session.mapper.header_line(dest)  # type: ignore[arg-type]
                self._dest = dest
            frame = b"".join((
                self._head, b"%d" % did,
                b"\nredelivered:true\n" if delivery.delivery_count else b"\n",
                line, block, m.body, b"\x00",
            ))
        except Exception as exc:  # noqa: BLE001 - only this delivery fails
            self._unrenderable(delivery, exc)
            return
        session.write(frame)
        if self._auto:
            session.auto_acks.append((self, did))
        elif self._track:
            msgids = self.msgids
            msgids[m.message_id] = did  # type: ignore[index]
            if len(msgids) > 2 * len(self.consumer.inflight if self.consumer else ()) + 1024:
                self._prune()

    def _unrenderable(self, delivery: Delivery, exc: Exception) -> None:
        """`delivery`'s message cannot be rendered as a MESSAGE frame (a field
        another protocol gave it has no STOMP text). Nothing was written, so only
        this delivery fails: as for the AMQP transport's unencodable messages, the
        broker poison-acks it (the redeliveryPlugin's policy, else the dead-letter
        queue) once the dispatch that handed it over is done, and the prefetch
        slot it took serves the next message."""
        log.warning("message %s on %s cannot be rendered for STOMP subscription %s "
                    "(%s: %s); it is poison-acked (dead-letter queue)",
                    delivery.message.message_id, delivery.message.destination, self.id,
                    type(exc).__name__, exc)
        if self.browser:
            return  # a browser's copy: nothing to settle
        asyncio.get_running_loop().call_soon(self._poison, delivery.id)

    def _poison(self, did: int) -> None:
        consumer = self.consumer
        if consumer is None or not consumer.holds(did):
            return  # the subscription ended meanwhile: the kernel released its deliveries
        consumer.nack(did, NackMode.POISON)

    def on_browse_end(self) -> None:
        """ActiveMQ ends a browse with an empty MESSAGE marked `browser:end`."""
        session = self.session
        session.write(
            f"MESSAGE\nsubscription:{escape(self.id, session.version)}\nmessage-id:0\n"
            f"browser:end\ndestination:{escape(self.destination_text, session.version)}\n"
            "content-length:0\n\n\x00".encode()
        )

    def on_closed(self, reason: str) -> None:
        """The broker ended the consumer (its destination was deleted)."""
        self.session.subscription_closed(self, reason)

    def all_parts(self) -> list[Subscription]:
        return [self, *self.parts] if self.parts else [self]

    # -- client -> kernel ----------------------------------------------------------------
    def holds(self, delivery_id: int) -> bool:
        c = self.consumer
        return c is not None and c.holds(delivery_id)

    def find_message(self, message_id: str) -> int | None:
        """The delivery id of an unacknowledged delivery of `message_id`."""
        c = self.consumer
        if c is None:
            return None
        did = self.msgids.get(message_id)
        if did is not None:
            return did if c.holds(did) else None
        for did, entry in c.inflight.items():
            if entry.message.message_id == message_id:
                return did
        return None

    def forget(self, message_ids: list[str]) -> None:
        for mid in message_ids:
            self.msgids.pop(mid, None)

    def _prune(self) -> None:
        c = self.consumer
        if c is None:
            return
        self.msgids = {mid: did for mid, did in self.msgids.items() if c.holds(did)}


def _needs_render(block: bytes, version: str) -> bool:
    """The cached block is escaped for 1.2; 1.1 differs only in not escaping CR,
    and 1.0 does not escape at all."""
    if version == V10:
        return b"\\" in block
    return b"\\r" in block
