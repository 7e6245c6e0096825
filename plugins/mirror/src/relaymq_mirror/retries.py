"""postAcks whose message is not on this broker (yet), kept in the store until
they are applied or given up (Artemis keeps its ack-retry list in its journal).

A mirror target accepts a ``postAck`` it cannot apply at once only after its
record is stored here: a target killed with -9 and restarted still has it.
Records live under the store key `KEY`, like the kernel's queue declarations
(``declared://`` keys are kept by every store and are not destinations): one
record per pending ack, a message whose body is the JSON list
``[source, address, queue, id, reason]``; applying or giving up removes it. On
a store that is not persistent they last for the broker process.

One task per broker looks for the messages of every pending postAck, whichever
broker sent it: every ``mirrorAckManagerRetryDelay`` ms, and at once when a
mirror link (from any source) stored a message a pending postAck names. It
starts with the broker (records a previous run left are looked for before any
mirror link is back), ends when nothing is pending, and is cancelled when the
broker stops. A timed look counts as an attempt only while a mirror link is
attached (a restarted target waits for its peers to reconnect) and none of
them is still storing a message (it may be the one); after
``mirrorAckManagerQueueAttempts`` attempts, or ten times as many looks, the
postAck is given up: counted and logged once per source.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import AddDestination, AddMessage, RemoveMessage
from relaymq_amqp.mapping import destination_for

from relaymq_mirror import wire
from relaymq_mirror.state import TargetIndex, applied, target_index, target_index_if_any

log = logging.getLogger("relaymq.mirror")

#: the store key of the records (the region does not recover ``declared://`` keys as queues)
KEY = "declared://mirror-ack-retries"
EXTENSION = "mirror-ack-retries"
PAGE = 500
#: a postAck whose message is not found is tried again this often (Artemis: 5 x 100 ms)
ACK_RETRIES = 5
ACK_RETRY_DELAY = 0.1
#: what a look for a pending postAck's message found
APPLIED, HELD, MISSING = "applied", "held", "missing"
#: with no mirror link attached and no postAck pending, the target index keeps up
#: with the change feed this long (a source that reconnects finds it current),
#: then leaves the feed (see `relaymq_mirror.state.TargetIndex`)
RELEASE_AFTER = 60.0
KEEP_UP_EVERY = 1.0


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
        #: of these ids wakes the looking task)
        self.idents: dict[int, int] = {}
        self._last_seq = 0
        self.loaded = False
        self._loading: asyncio.Task[None] | None = None
        self._created = False
        #: the targets of the mirror links attached now (any source)
        self.links: set[Any] = set()
        #: postAcks given up, by source broker
        self.not_found: dict[str, int] = {}
        self._warned: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.stopped = False
        #: seconds without links or pending postAcks before the target index is released
        self.release_after = RELEASE_AFTER
        self._releasing: asyncio.Task[None] | None = None

    @property
    def _persistent(self) -> bool:
        return bool(getattr(self.broker.region, "store_persistent", False))

    async def load(self) -> None:
        """Read the records a previous run of this broker left (once; callers
        that come while it is under way wait for it)."""
        if self._loading is None:
            self._loading = asyncio.get_running_loop().create_task(self._load())
        await asyncio.shield(self._loading)

    async def _load(self) -> None:
        if not self._persistent:
            self.loaded = True
            return
        store = self.broker.region.store
        self._created = KEY in await store.destinations()
        if not self._created:
            self.loaded = True
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
        self.loaded = True
        if self.pending:
            log.info("mirror: %d postAck(s) waiting for their message since before the restart",
                     len(self.pending))

    def _keep(self, ack: PendingAck) -> None:
        self.pending[ack.seq] = ack
        self.idents[ack.ident] = self.idents.get(ack.ident, 0) + 1

    async def add(self, items: list[tuple[str, str, str, int, str]]) -> list[PendingAck]:
        """Keep (source, address, queue, id, reason) postAcks; returns once stored."""
        if not self.loaded:
            await self.load()  # record numbers follow those a previous run left
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

    # -- looking for the messages --------------------------------------------------------
    def start(self) -> None:
        """Look for the pending postAcks' messages in the background (one task per
        broker; it loads what a previous run left first, and ends when nothing is
        pending)."""
        task = self._task
        if not self.stopped and (task is None or task.done()):
            self._task = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        """A message a pending postAck names was stored: look now."""
        self._wake.set()
        if self.pending:
            self.start()

    def stop(self) -> None:
        """The broker stops: no more looking (the records stay)."""
        self.stopped = True
        task, self._task = self._task, None
        for t in (task, self._loading, self._releasing):
            if t is not None and not t.done():
                t.cancel()

    def attached(self, link: Any) -> None:
        """A mirror link from `link.source_id` attached: its source's pending postAcks
        get their attempts afresh (it is back, and sends what it had not settled)."""
        self.links.add(link)
        task, self._releasing = self._releasing, None
        if task is not None and not task.done():
            task.cancel()  # a link reads the index again
        for ack in self.pending.values():
            if ack.source == link.source_id:
                ack.attempts = ack.looks = 0
        self.start()

    def detached(self, link: Any) -> None:
        self.links.discard(link)
        self._when_idle()

    def _idle(self) -> bool:
        return not self.links and not self.pending and not self.stopped

    def _when_idle(self) -> None:
        """No mirror link is attached and no postAck waits: nobody reads the target
        index's feed subscriber, so a task keeps it current for `release_after`
        seconds and then releases it (unless a link attached or a postAck came)."""
        task = self._releasing
        index = target_index_if_any(self.broker)
        if self._idle() and index is not None and (task is None or task.done()):
            self._releasing = asyncio.get_running_loop().create_task(
                self._release_when_idle(index))

    async def _release_when_idle(self, index: TargetIndex) -> None:
        waited = 0.0
        while waited < self.release_after:
            step = min(KEEP_UP_EVERY, self.release_after - waited)
            await asyncio.sleep(step)
            waited += step
            if not self._idle():
                return  # a postAck came (an attaching link cancels this task)
            index.absorb()
        index.release()
        log.info("mirror: no mirror link for %.0f s: the target index is released (it is "
                 "read again from the store when a link needs it)", self.release_after)

    async def _run(self) -> None:
        await self.load()
        wake = self._wake
        delay, attempts = self._settings()
        while self.pending and not self.stopped:
            try:
                await asyncio.wait_for(wake.wait(), delay)
                timed = False
            except TimeoutError:
                timed = True
            wake.clear()
            try:
                await self.look(timed, attempts)
            except Exception:  # noqa: BLE001 - keep looking: a postAck waits for this task
                log.exception("mirror: looking for the messages of pending postAcks failed")
        self._when_idle()

    async def look(self, timed: bool, attempts: int) -> None:
        """Apply every pending postAck whose message is here now; on a timed look,
        count an attempt for the others (see the module's description)."""
        links = self.links
        counting = timed and bool(links)
        busy = any(link.storing() for link in links)
        finished = []
        for ack in list(self.pending.values()):
            found = await self._apply(ack)
            if found == APPLIED:
                finished.append(ack)
            elif found == HELD:
                ack.attempts = ack.looks = 0  # here, held by a consumer: wait for its release
            elif counting:
                ack.looks += 1
                if not busy:
                    ack.attempts += 1
                if ack.attempts >= attempts or ack.looks >= 10 * attempts:
                    finished.append(ack)
                    self._given_up(ack)
        if finished:
            await self.done(finished)

    async def _apply(self, ack: PendingAck) -> str:
        """Remove the message `ack` names when it is here and no consumer holds it:
        `APPLIED`, `HELD` (here, delivered to a consumer and not settled: looked
        for again, without counting attempts, until the consumer releases it) or
        `MISSING`."""
        broker = self.broker
        holder = holder_of(broker, ack.address, ack.queue)
        if holder is None:
            return MISSING
        index = target_index(broker)
        seq = await index.find(holder, ack.ident)
        if seq is None:
            return APPLIED if await self._unschedule(holder, ack) else MISSING
        index.forget(holder.key, ack.ident)
        applied(broker).ack(holder.key, seq, ack.source)
        held: list[int] = []
        await holder.remove_messages([seq], ack.reason, held)
        if held:
            index.remember(holder.key, ack.ident, seq)
            return HELD
        return APPLIED

    async def _unschedule(self, holder: Any, ack: PendingAck) -> bool:
        """The message `ack` names is a scheduled job here, not due yet (the source
        delivered it first: another clock, or a delay counted from when each broker
        read it): the job is dropped, so the message the source's consumer
        acknowledged is never delivered here. Queues only: a job for a topic
        delivers to every subscription, the postAck names one."""
        scheduler = getattr(self.broker, "scheduler", None)
        dest = holder.destination
        if scheduler is None or not scheduler.pending or not dest.is_queue:
            return False
        ident, source = ack.ident, ack.source

        def match(m: Message) -> bool:
            return (m.destination == dest and (m.origin is None or m.origin == source)
                    and wire.id_of(m) == ident)

        return bool(await scheduler.cancel(match))

    def _given_up(self, ack: PendingAck) -> None:
        self.not_found[ack.source] = self.not_found.get(ack.source, 0) + 1
        if ack.source not in self._warned:
            self._warned.add(ack.source)
            log.warning("mirror: a postAck named message %d on %s, which is not here (consumed "
                        "here already, or never mirrored); given up (from %s: further ones are "
                        "counted, not logged)", ack.ident, ack.queue, ack.source)
        else:
            log.debug("mirror: postAck for unknown message %d on %s", ack.ident, ack.queue)

    def _settings(self) -> tuple[float, int]:
        """(seconds between looks, attempts): Artemis' ``mirrorAckManagerRetryDelay``
        (ms) and ``mirrorAckManagerQueueAttempts`` as broker properties (``-D``),
        else ACK_RETRY_DELAY and ACK_RETRIES."""
        props = getattr(getattr(self.broker, "config", None), "properties", None) or {}
        delay, attempts = ACK_RETRY_DELAY, ACK_RETRIES
        try:
            if "mirrorAckManagerRetryDelay" in props:
                delay = max(int(props["mirrorAckManagerRetryDelay"]), 1) / 1000.0
            if "mirrorAckManagerQueueAttempts" in props:
                attempts = max(int(props["mirrorAckManagerQueueAttempts"]), 1)
        except (TypeError, ValueError):
            log.warning("mirror: mirrorAckManagerRetryDelay and mirrorAckManagerQueueAttempts "
                        "take whole numbers; using %d ms and %d", int(delay * 1000), attempts)
        return delay, attempts


def holder_of(broker: Any, address: str, queue: str) -> Any:
    """The queue or durable subscription a postAck (or deleteQueue) names: a
    RelayMQ source writes ``queue://X``/``topic://X`` addresses, an Artemis one
    bare names (a subscription queue is ``client-id.name``)."""
    region = broker.region
    if "://" in address:
        dest = destination_for(address)
        if dest.is_queue:
            return region.queues.get(Destination.queue(queue) if queue else dest)
        split = wire.split_subscription_queue(queue)
        if split is None:
            return None
        return region.subscriptions.get(f"durable://{split[0]}:{split[1]}")
    found = region.queues.get(Destination.queue(queue))
    if found is not None:
        return found
    split = wire.split_subscription_queue(queue)
    if split is not None:
        return region.subscriptions.get(f"durable://{split[0]}:{split[1]}")
    return None


def ack_retries(broker: Any) -> AckRetries:
    found = broker.extensions.get(EXTENSION)
    if not isinstance(found, AckRetries):
        found = AckRetries(broker)
        broker.extensions[EXTENSION] = found
    return found
