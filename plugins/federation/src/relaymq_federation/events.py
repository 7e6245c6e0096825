"""``AMQ_FEDERATION_EVENT_LINK``: events the peer's federation asked for.

A queue receiver refused because its queue does not exist is remembered
(`missing_queue`); when the queue is created, the peer is told on its events
receiver link -- ``x-opt-amq-federation-ev-type: REQUESTED_QUEUE_ADDED_EVENT``
and the map ``{REQUESTED_ADDRESS_NAME, REQUESTED_QUEUE_NAME}`` -- so an Artemis
source attaches again at once (a RelayMQ source also retries on its own).
Events the peer sends (its events sender) are accepted and not acted on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, ClassVar

from relaymq.feed import DestinationCreated
from relaymq_amqp import engine as pn
from relaymq_amqp.encode import section
from relaymq_amqp.engine import Terminus
from relaymq_amqp.types import Symbol

from relaymq_federation import wire
from relaymq_federation.state import CONTROL_CREDIT, PRECONDITION, PeerState, peer_state

log = logging.getLogger("relaymq.federation")

QUEUE_ADDED = "REQUESTED_QUEUE_ADDED_EVENT"
ADDRESS_ADDED = "REQUESTED_ADDRESS_ADDED_EVENT"


def queue_added_event(address: str, queue: str) -> bytes:
    return section(0x72, {Symbol(wire.EVENT_TYPE): QUEUE_ADDED}) + section(
        0x77, {"REQUESTED_ADDRESS_NAME": address, "REQUESTED_QUEUE_NAME": queue})


def missing_queue(state: PeerState, broker: Any, address: str, queue: str) -> None:
    """Tell the peer when `queue` appears (if it listens for events)."""
    state.missing.add((address, queue))
    if state.watch is None or state.watch.done():
        state.watch = asyncio.get_running_loop().create_task(_watch(state, broker))


async def _watch(state: PeerState, broker: Any) -> None:
    feed = broker.change_feed.subscribe({DestinationCreated}, name="federation missing queues")
    try:
        while state.missing:
            event = await feed.get()
            dest = event.destination
            if not dest.is_queue:
                continue
            for address, queue in [m for m in state.missing if m[1] == dest.name]:
                state.missing.discard((address, queue))
                if state.events is not None:
                    state.events.post(queue_added_event(address, queue))
    finally:
        feed.close()


class EventLink:
    """Both directions of ``AMQ_FEDERATION_EVENT_LINK``."""

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
            link.open(target=target, offered_capabilities=[wire.EVENT_LINK], credit=CONTROL_CREDIT)
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
        if self.link.peer_sends:
            if self.link.receive(delivery) is not None:
                self.link.accept(delivery)
                self.link.flow(1)
        else:
            pn.delivery_settle(delivery)

    def on_detach(self, closed: bool) -> None:
        if self.state.events is self:
            self.state.events = None
        self.state.links.discard(self)
        self.state.release()
