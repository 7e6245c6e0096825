"""postAcks whose message is not on this broker (yet), kept in the store until
they are applied or given up (Artemis keeps its ack-retry list in its journal).

A mirror target accepts a ``postAck`` it cannot apply at once only after its
record is stored here: a target killed with -9 and restarted still has it, and
tries again when a mirror link from that source is back. Records live under the
store key `KEY`, like the kernel's queue declarations (``declared://`` keys are
kept by every store and are not destinations): one record per pending ack, a
message whose body is the JSON list ``[source, address, queue, id, reason]``;
applying or giving up removes it. On a store that is not persistent they last
for the broker process.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from relaymq.model.message import Message
from relaymq.spi.persistence import AddDestination, AddMessage, RemoveMessage

log = logging.getLogger("relaymq.mirror")

#: the store key of the records (the region does not recover ``declared://`` keys as queues)
KEY = "declared://mirror-ack-retries"
_EXTENSION = "mirror-ack-retries"
PAGE = 500


class PendingAck:
    """One postAck waiting for its message."""

    __slots__ = ("seq", "source", "address", "queue", "ident", "reason", "attempts", "looks")

    def __init__(self, seq: int, source: str, address: str, queue: str, ident: int,
                 reason: str) -> None:
        self.seq = seq  # its record's number in the store
        self.source = source
        self.address = address
        self.queue = queue
        self.ident = ident
        self.reason = reason
        self.attempts = 0  # looks that did not find it while nothing was being stored
        self.looks = 0

    def record(self) -> Message:
        body = json.dumps([self.source, self.address, self.queue, self.ident, self.reason])
        return Message(body.encode(), durable=True)


class AckRetries:
    """The pending postAcks of one broker (every mirror link shares them)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.pending: dict[int, PendingAck] = {}  # by record number
        #: internal id -> how many pending acks name it (a message arriving with one
        #: of these ids makes its link try again at once)
        self.idents: dict[int, int] = {}
        self._last_seq = 0
        self.loaded = False
        self._created = False

    @property
    def _persistent(self) -> bool:
        return bool(getattr(self.broker.region, "store_persistent", False))

    async def load(self) -> None:
        """Read the records a previous run of this broker left (once)."""
        if self.loaded:
            return
        self.loaded = True
        if not self._persistent:
            return
        store = self.broker.region.store
        self._created = KEY in await store.destinations()
        if not self._created:
            return
        self._last_seq = max(self._last_seq, (await store.stats(KEY)).last_seq)
        after = 0
        while True:
            page = await store.read(KEY, after, PAGE)
            for rec in page:
                after = rec.seq
                self._last_seq = max(self._last_seq, rec.seq)
                try:
                    source, address, queue, ident, reason = json.loads(rec.message.body)
                    self._keep(PendingAck(rec.seq, str(source), str(address), str(queue),
                                          int(ident), str(reason)))
                except (ValueError, TypeError) as exc:
                    log.warning("mirror: an unreadable postAck retry record %d is dropped: %s",
                                rec.seq, exc)
                    await self.broker.region.writer.write([RemoveMessage(KEY, rec.seq)])
            if len(page) < PAGE:
                break
        if self.pending:
            log.info("mirror: %d postAck(s) waiting for their message since before the restart",
                     len(self.pending))

    def _keep(self, ack: PendingAck) -> None:
        self.pending[ack.seq] = ack
        self.idents[ack.ident] = self.idents.get(ack.ident, 0) + 1

    async def add(self, items: list[tuple[str, str, str, int, str]]) -> list[PendingAck]:
        """Keep (source, address, queue, id, reason) postAcks; returns once stored."""
        ops: list[Any] = []
        if self._persistent and not self._created:
            ops.append(AddDestination(KEY))
            self._created = True
        acks = []
        for source, address, queue, ident, reason in items:
            self._last_seq += 1
            ack = PendingAck(self._last_seq, source, address, queue, ident, reason)
            acks.append(ack)
            self._keep(ack)
            if self._persistent:
                ops.append(AddMessage(KEY, ack.seq, ack.record()))
        if ops:
            await self.broker.region.writer.write(ops)
        return acks

    def of(self, source: str) -> list[PendingAck]:
        return [a for a in self.pending.values() if a.source == source]

    async def done(self, acks: list[PendingAck]) -> None:
        """`acks` were applied or given up: forget them (and their records)."""
        ops: list[Any] = []
        for ack in acks:
            if self.pending.pop(ack.seq, None) is None:
                continue
            left = self.idents.get(ack.ident, 0) - 1
            if left > 0:
                self.idents[ack.ident] = left
            else:
                self.idents.pop(ack.ident, None)
            if self._persistent:
                ops.append(RemoveMessage(KEY, ack.seq))
        if ops:
            await self.broker.region.writer.write(ops)


def ack_retries(broker: Any) -> AckRetries:
    found = broker.extensions.get(_EXTENSION)
    if not isinstance(found, AckRetries):
        found = AckRetries(broker)
        broker.extensions[_EXTENSION] = found
    return found
