"""Exactly-once to a STOMP target without duplicate detection (ActiveMQ Classic,
RabbitMQ): a transaction and a persisted last-forwarded marker.

Each batch is sent in one STOMP transaction together with a marker message (on
``/queue/relaymq.bridge.<name>.marker`` on the target) that lists digests of the
stable ids of the newest committed messages: this batch and the ones before it,
up to a window of `window_size` ids. The source is acknowledged after the
COMMIT's receipt. After any failure the bridge reads the newest marker back
before it forwards again: a redelivered source message whose id it lists is
already on the target (the commit happened, the source acknowledgement did not)
and is acknowledged without being sent. A failure before the COMMIT rolls the
whole batch back on the target, so it is simply sent again.

Why a window and not only the last batch: acknowledging a source message does
not wait for the source to store the acknowledgement (AMQP settles it at once;
a broker writes acknowledgements in the background). A source killed with -9
therefore redelivers every batch whose acknowledgements it had not written yet,
which can be several batches back, not only the one in doubt on the target.

Limits: this needs source ids that stay the
same across redeliveries (RelayMQ, ActiveMQ and Artemis keep a message's id;
RabbitMQ's STOMP message-id is per delivery unless the producer set one or
`_AMQ_DUPL_ID`). The marker queue holds one or two small messages; do not
consume from it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from typing import Any

from relaymq.model.destination import Destination
from relaymq.model.message import BodyType, Message
from relaymq.spi.outgoing import Delivery

PROBE = "relaymq-bridge-probe"


def window_size(max_batch_size: int) -> int:
    """How many committed ids a marker lists: enough for the acknowledgements a
    killed source can have lost (many batches), small enough to send per batch."""
    return max(200, 20 * max_batch_size)


def digest(stable_id: str) -> str:
    """What a marker lists for a stable id (64 bits: short, no collision in a window)."""
    return hashlib.blake2b(stable_id.encode(), digest_size=8).hexdigest()


def listed(stable_id: str, committed: set[str]) -> bool:
    """Whether a marker's ids name `stable_id` (markers of older versions list it whole)."""
    return digest(stable_id) in committed or stable_id in committed


def marker_destination(bridge_name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in bridge_name)
    return f"/queue/relaymq.bridge.{safe}.marker"


class MarkerLedger:
    """The marker queue of one bridge, read and written on the target connection."""

    def __init__(self, session: Any, destination: str, timeout: float, size: int) -> None:
        self.session = session
        self.destination = destination
        self.timeout = timeout
        self.size = size
        self.committed: set[str] = set()  # what the newest marker lists
        #: the newest committed marker's list, oldest first, and the one being committed
        self._window: list[str] = []
        self._pending: list[str] | None = None
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
        if not isinstance(ids, list):
            delivery.accept()  # not ours
            return
        if self._held is not None:
            self._held.accept()  # an older marker: the newer one replaces it
        self._held = delivery
        self._window = [str(i) for i in ids][-self.size:]
        self.committed = set(self._window)

    def marker(self, ids: list[str]) -> Message:
        """The marker to commit with the batch of `ids`: it lists them after the
        newest committed ones, up to the window; `committed_now` makes it the newest."""
        window = (self._window + [digest(i) for i in ids])[-self.size:]
        self._pending = window
        return Message(json.dumps(window).encode(), destination=Destination.queue("marker"),
                       durable=True, body_type=BodyType.TEXT)

    def committed_now(self) -> None:
        """The transaction with the last `marker` committed."""
        if self._pending is not None:
            self._window, self._pending = self._pending, None
