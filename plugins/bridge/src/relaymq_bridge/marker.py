"""Exactly-once to a STOMP target without duplicate detection (ActiveMQ Classic,
RabbitMQ): a transaction and a persisted last-forwarded marker.

Each batch is sent in one STOMP transaction together with a marker message (on
``/queue/relaymq.bridge.<name>.marker`` on the target) that lists the stable
ids of the batch; the source is acknowledged after the COMMIT's receipt. After
any failure the bridge reads the newest marker back before it forwards again:
a redelivered source message whose id it lists is already on the target (the
commit happened, the source acknowledgement did not) and is acknowledged
without being sent. A failure before the COMMIT rolls the whole batch back on
the target, so it is simply sent again.

Limits: one batch is in doubt at a time, so this needs source ids that stay the
same across redeliveries (RelayMQ, ActiveMQ and Artemis keep a message's id;
RabbitMQ's STOMP message-id is per delivery unless the producer set one or
`_AMQ_DUPL_ID`). The marker queue holds one or two small messages; do not
consume from it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from relaymq.model.destination import Destination
from relaymq.model.message import BodyType, Message
from relaymq.spi.outgoing import Delivery

PROBE = "relaymq-bridge-probe"


def marker_destination(bridge_name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in bridge_name)
    return f"/queue/relaymq.bridge.{safe}.marker"


class MarkerLedger:
    """The marker queue of one bridge, read and written on the target connection."""

    def __init__(self, session: Any, destination: str, timeout: float) -> None:
        self.session = session
        self.destination = destination
        self.timeout = timeout
        self.committed: set[str] = set()  # ids of the newest committed batch
        self._held: Delivery | None = None
        self._probe: str | None = None
        self._probe_seen = asyncio.Event()
        self.sender: Any = None

    async def recover(self) -> set[str]:
        """Read the newest marker (everything up to a probe sent now)."""
        self.sender = await self.session.open_sender(self.destination)
        await self.session.open_receiver(self.destination, self._on_marker, credit=10)
        self._probe = uuid.uuid4().hex
        probe = Message(b"", destination=Destination.queue("marker"), durable=False,
                        body_type=BodyType.TEXT, properties={PROBE: self._probe})
        outcome = await self.sender.send(probe)
        if not outcome.accepted:
            raise ConnectionError(f"the marker queue {self.destination} refused a message: "
                                  f"{outcome.description}")
        await asyncio.wait_for(self._probe_seen.wait(), self.timeout)
        return set(self.committed)

    def _on_marker(self, delivery: Delivery) -> None:
        props = delivery.message.properties
        probe = props.get(PROBE)
        if probe is not None:
            delivery.accept()
            if probe == self._probe:
                self._probe_seen.set()
            return
        try:
            ids = json.loads(bytes(delivery.message.body).decode())
        except ValueError:
            delivery.accept()  # not ours
            return
        if self._held is not None:
            self._held.accept()  # an older marker: the newer one replaces it
        self._held = delivery
        self.committed = {str(i) for i in ids}

    def marker(self, ids: list[str]) -> Message:
        return Message(json.dumps(ids).encode(), destination=Destination.queue("marker"),
                       durable=True, body_type=BodyType.TEXT)
