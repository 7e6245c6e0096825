"""The events links a ``<federation>`` attaches on its connection (Artemis'
``AMQPFederationSource``), right after the control link:

* the **events receiver** (only with local policies): link
  ``federation-events-receiver:<federation>:<node id>:<uuid>``, a dynamic
  source (``temporary-topic``, deleted with the link), desiring
  ``AMQ_FEDERATION_EVENT_LINK``. The peer announces on it that a queue or an
  address a receiver of ours was refused for exists now; the receivers waiting
  for it are attached again at once (`PolicyRunner.resource_added`). While it is
  attached, a refused receiver otherwise waits
  `receivers.RETRY_DELAY_WITH_EVENTS` seconds before it is tried again.
* the **events sender** (only with remote policies): link
  ``federation-events-sender:<federation>:<node id>:<uuid>``, a dynamic target,
  pre-settled. The peer applies our remote policies by attaching receivers to
  this broker; when one is refused because its queue or address is missing
  here, this broker tells the peer on this link once it appears
  (`events.missing_queue` / `missing_address`).

A peer that does not offer ``AMQ_FEDERATION_EVENT_LINK`` on its answer gets
the link closed, and the federation runs without events (receivers refused
are tried again every `receivers.RETRY_DELAY` seconds), as Artemis does.
The links are attached again with the connection after a reconnection.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Terminus
from relaymq_amqp.types import Described, Symbol

from relaymq_federation import wire
from relaymq_federation.events import EVENT_CREDIT, decode_event
from relaymq_federation.policies import PolicyRunner
from relaymq_federation.state import PeerState

log = logging.getLogger("relaymq.federation")

DELETE_ON_CLOSE = Described(Symbol("amqp:delete-on-close:list"), [])


def _dynamic(kind: int) -> Terminus:
    return Terminus(kind=kind, dynamic=True, capabilities=["temporary-topic"],
                    expiry_policy=pn.EXPIRE_WITH_LINK,
                    dynamic_node_properties={Symbol("lifetime-policy"): DELETE_ON_CLOSE})


class _EventsSender:
    """`PeerState.events` of the broker connection: what the peer's receivers
    were refused for, announced on our events sender."""

    def __init__(self, link: Any) -> None:
        self.link = link

    def post(self, event: bytes) -> None:
        if not self.link.closed:
            self.link.send(event)  # pre-settled: at most once


class SourceEvents:
    """The events receiver and sender of one federation's connection."""

    def __init__(self, conn: Any, name: str, node_id: str, runner: PolicyRunner) -> None:
        self.conn = conn
        self.name = name
        self.node_id = node_id
        self.runner = runner
        self.receiver: Any = None
        self.sender: Any = None
        self.received = 0

    @property
    def label(self) -> str:
        return f"federation {self.name}"

    async def open_receiver(self) -> None:
        """The peer's events for our local policies (best effort: without it
        refused receivers are retried on their own)."""
        name = f"{wire.EVENTS_RECEIVER_PREFIX}{self.name}:{self.node_id}:{uuid.uuid4()}"
        try:
            link = await self.conn.attach_receiver(
                name, _dynamic(1), Terminus(kind=2), on_message=self._on_event,
                credit=EVENT_CREDIT, desired_capabilities=[wire.EVENT_LINK])
        except Exception as exc:  # noqa: BLE001 - runs without events
            log.info("%s: no events receiver (%s); refused receivers are retried on their own",
                     self.label, exc)
            return
        if not await self._offered(link, "receiver"):
            return
        self.receiver = link
        self.runner.set_events(True)

    async def open_sender(self, state: PeerState) -> None:
        """Our events to the peer, for the receivers of our remote policies."""
        name = f"{wire.EVENTS_SENDER_PREFIX}{self.name}:{self.node_id}:{uuid.uuid4()}"
        try:
            link = await self.conn.attach_sender(name, Terminus(kind=1), _dynamic(2),
                                                 desired_capabilities=[wire.EVENT_LINK],
                                                 presettled=True)
        except Exception as exc:  # noqa: BLE001 - runs without events
            log.info("%s: no events sender (%s)", self.label, exc)
            return
        if not await self._offered(link, "sender"):
            return
        self.sender = link
        state.events = _EventsSender(link)

    async def _offered(self, link: Any, role: str) -> bool:
        offered = getattr(link, "remote_offered_capabilities", None) or []
        if wire.EVENT_LINK in offered:
            log.info("%s: events %s attached", self.label, role)
            return True
        log.warning("%s: the peer does not offer %s on the events %s; federation runs without "
                    "events", self.label, wire.EVENT_LINK, role)
        await link.close()
        return False

    def _on_event(self, incoming: Any) -> None:
        try:
            address, queue = decode_event(incoming.data)
        except ValueError as exc:
            log.warning("%s: bad event from the peer rejected: %s", self.label, exc)
            incoming.reject()
            return
        incoming.accept()
        self.received += 1
        self.runner.resource_added(address, queue)

    def check(self) -> None:
        """Events receiver gone (refused after a reconnection): retry on our own."""
        if self.receiver is not None and self.receiver.closed:
            self.receiver = None
            self.runner.set_events(False)

    def status(self) -> dict[str, Any]:
        return {"receiver": self.receiver is not None and not self.receiver.closed,
                "sender": self.sender is not None and not self.sender.closed,
                "received": self.received}

    async def close(self) -> None:
        for link in (self.receiver, self.sender):
            if link is not None and not link.closed:
                await link.close()
