"""``AMQ_FEDERATION_EVENT_LINK``: "what you asked for exists now".

A federation receiver can be refused because what it asks for is missing
here: a queue receiver's queue does not exist, or an address receiver's topic
does not exist and the peer's federation may not create it (no ``admin``
right on it, see docs/auth.md). The refusal is remembered (`missing_queue`,
`missing_address`) and, once the queue or topic is created, the peer is told
on its events receiver link (this broker's events sender):

* ``x-opt-amq-federation-ev-type: REQUESTED_QUEUE_ADDED_EVENT`` with the map
  ``{REQUESTED_ADDRESS_NAME, REQUESTED_QUEUE_NAME}``;
* ``REQUESTED_ADDRESS_ADDED_EVENT`` with ``{REQUESTED_ADDRESS_NAME}``;

and attaches its receiver again at once. Events that come the other way (the
peer's events sender) are handed to the federation of the connection
(`resource_added` of its control), which does the same for its receivers.
Events are sent settled (at most once): a receiver still refused is attached
again on its own later.

`EventLink` is the link handler for both directions on a link the peer
attaches; `decode_event` is shared with the side that attaches them
(`source_events`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, ClassVar

from relaymq.feed import DestinationCreated
from relaymq.model.destination import Destination
from relaymq_amqp import engine as pn
from relaymq_amqp.encode import section
from relaymq_amqp.engine import Terminus
from relaymq_amqp.scanner import decode, scan
from relaymq_amqp.types import Symbol

from relaymq_federation import wire
from relaymq_federation.state import CONTROL_CREDIT, PRECONDITION, PeerState, peer_state

log = logging.getLogger("relaymq.federation")

QUEUE_ADDED = "REQUESTED_QUEUE_ADDED_EVENT"
ADDRESS_ADDED = "REQUESTED_ADDRESS_ADDED_EVENT"
ADDRESS_NAME = "REQUESTED_ADDRESS_NAME"
QUEUE_NAME = "REQUESTED_QUEUE_NAME"
#: an event receiver grants this much credit again once it is down to a third
EVENT_CREDIT = CONTROL_CREDIT


def queue_added_event(address: str, queue: str) -> bytes:
    return section(0x72, {Symbol(wire.EVENT_TYPE): QUEUE_ADDED}) + section(
        0x77, {ADDRESS_NAME: address, QUEUE_NAME: queue})


def address_added_event(address: str) -> bytes:
    return section(0x72, {Symbol(wire.EVENT_TYPE): ADDRESS_ADDED}) + section(
        0x77, {ADDRESS_NAME: address})


def annotated_value(data: bytes, what: str) -> tuple[dict[Any, Any], Any]:
    """(message annotations, body value) of a control or event message (annotations
    {} when absent, value None without a body); ValueError naming `what` when `data`
    is not an AMQP message."""
    try:
        s = scan(data)
        ann = decode(data, s.message_annotations[0])[0] if s.message_annotations else {}
        body = decode(data, s.body_start)[0] if s.body_end > s.body_start else None
    except Exception as exc:  # noqa: BLE001 - not an AMQP message
        raise ValueError(f"undecodable {what}: {exc}") from None
    return (ann if isinstance(ann, dict) else {}), getattr(body, "value", None)


def decode_event(data: bytes) -> tuple[str, str | None]:
    """(address, queue) of an event message (queue None: an address event);
    ValueError for anything else."""
    ann, value = annotated_value(data, "event")
    kind = ann.get(wire.EVENT_TYPE)
    if not isinstance(value, dict):
        raise ValueError(f"event {kind!r} without a map body")
    fields = {str(k): v for k, v in value.items()}
    address = fields.get(ADDRESS_NAME)
    if not isinstance(address, str):
        raise ValueError(f"event {kind!r} without {ADDRESS_NAME}")
    if kind == ADDRESS_ADDED:
        return address, None
    if kind == QUEUE_ADDED:
        queue = fields.get(QUEUE_NAME)
        if not isinstance(queue, str):
            raise ValueError(f"event {kind!r} without {QUEUE_NAME}")
        return address, queue
    raise ValueError(f"unknown federation event {kind!r}")


# -- what the peer asked for and was refused ---------------------------------------------
def missing_queue(state: PeerState, broker: Any, address: str, queue: str) -> None:
    """Tell the peer when `queue` appears (if it listens for events)."""
    _missing(state, broker, (address, queue))


def missing_address(state: PeerState, broker: Any, address: str) -> None:
    """Tell the peer when the topic `address` appears."""
    _missing(state, broker, (address, None))


def _exists(broker: Any, address: str, queue: str | None) -> bool:
    if queue is not None:
        return broker.management.queue(Destination.queue(queue)) is not None
    region = getattr(broker, "region", None)
    return region is not None and Destination.topic(address) in region.topics


def _missing(state: PeerState, broker: Any, item: tuple[str, str | None]) -> None:
    state.missing.add(item)
    if state.watch is None or state.watch.done():
        # subscribed now, before the refusal goes out: a creation right after is seen
        feed = broker.change_feed.subscribe({DestinationCreated}, name="federation missing resources")
        state.watch = asyncio.get_running_loop().create_task(_watch(state, feed))
    if _exists(broker, *item):  # created between the check and the subscription
        asyncio.get_running_loop().call_soon(_found, state, item)


def _found(state: PeerState, item: tuple[str, str | None]) -> None:
    if item not in state.missing:
        return
    state.missing.discard(item)
    address, queue = item
    event = address_added_event(address) if queue is None else queue_added_event(address, queue)
    if state.events is not None:
        log.info("federation: telling the peer that %s %s exists now",
                 "address" if queue is None else "queue", queue or address)
        state.events.post(event)


async def _watch(state: PeerState, feed: Any) -> None:
    try:
        while state.missing:
            event = await feed.get()
            dest = event.destination
            if dest.is_temporary:
                continue
            for item in [m for m in state.missing if
                         (m[1] == dest.name if dest.is_queue else m[1] is None and m[0] == dest.name)]:
                _found(state, item)
    finally:
        feed.close()


class EventLink:
    """Both directions of ``AMQ_FEDERATION_EVENT_LINK`` on a link the peer attached."""

    address_prefixes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, link: Any) -> None:
        self.link = link
        self.state = peer_state(link.conn)
        self._pending: deque[bytes] = deque()
        self._tag = 0

    def attach(self) -> None:
        link = self.link
        state = self.state
        if state.control is None:
            link.refuse(PRECONDITION, "no federation control link on this connection")
            state.release()
            return
        state.links.add(self)
        if link.peer_sends:
            target = Terminus(kind=2, address=link.name, dynamic=True,
                              capabilities=list(link.remote_target.capabilities))
            link.open(target=target, offered_capabilities=[wire.EVENT_LINK], credit=EVENT_CREDIT)
            self._peer_events(True)
        else:
            source = Terminus(kind=1, address=f"{wire.FEDERATION_PREFIX}.events.{link.name}",
                              dynamic=True, capabilities=list(link.remote_source.capabilities))
            link.open(source=source, offered_capabilities=[wire.EVENT_LINK],
                      snd_settle_mode=pn.SND_SETTLED)
            state.events = self

    def post(self, event: bytes) -> None:
        """Send an event (settled: Artemis' events link is at-most-once)."""
        self._pending.append(event)
        self.on_flow()

    def on_flow(self) -> None:
        link = self.link
        while self._pending and not link.closed and link.credit > 0:
            self._tag += 1
            delivery = link.send(self._pending.popleft(), self._tag)
            pn.delivery_settle(delivery)
            link.flush()

    def on_delivery(self, delivery: Any) -> None:
        link = self.link
        if not link.peer_sends:
            pn.delivery_settle(delivery)
            return
        data = link.receive(delivery)
        if data is None:
            return
        try:
            address, queue = decode_event(data)
        except ValueError as exc:
            log.warning("federation events link %s: %s", link.name, exc)
            link.reject(delivery, "amqp:invalid-field", str(exc))
        else:
            link.accept(delivery)
            added = getattr(self.state.control, "resource_added", None)
            if added is not None:
                added(address, queue)
        if link.credit <= EVENT_CREDIT // 3:
            link.flow(EVENT_CREDIT - link.credit)

    def _peer_events(self, attached: bool) -> None:
        note = getattr(self.state.control, "peer_events", None)
        if note is not None:
            note(attached)

    def on_detach(self, closed: bool) -> None:
        if self.link.peer_sends and self in self.state.links:
            self._peer_events(False)
        if self.state.events is self:
            self.state.events = None
        self.state.links.discard(self)
        self.state.release()
