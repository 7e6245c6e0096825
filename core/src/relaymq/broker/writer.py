"""The broker's one store-write path, and its group commit.

Every change the broker stores goes through `StoreWriter`: sends of every
protocol (`commit_soon`), local transactions and dead-letter moves (`commit`),
acknowledgements, expiry and other removals (`remove`), destinations, durable
subscriptions and change-feed cursors (`write`). Everything handed over in one
event-loop turn becomes *one* store write (one journal record, one sync), then,
in the order it was handed over: the change feed receives its events, and the
messages become visible to consumers. Writes complete in the order they were
made, so a producer's messages never overtake each other.

When the store is at its `storeUsage` limit, the turn's free-standing removals
(acks) are written first, so consumers keep freeing space while producers wait.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Final, Protocol

from relaymq.dispatch.batch import SendBatch
from relaymq.dispatch.consumer import QueueBase
from relaymq.dispatch.entry import QueueEntry
from relaymq.errors import MessageFormatError, RelayMQError, StoreWriteError
from relaymq.failures import RepeatedFailures
from relaymq.feed.constructors import added, removed
from relaymq.feed.events import ChangeEvent
from relaymq.feed.feed import ChangeFeed
from relaymq.model.codec import unstorable_field
from relaymq.model.message import Message
from relaymq.spi.persistence import (
    AddMessage,
    PersistenceAdapter,
    StoreOp,
    removal_ops,
)

log = logging.getLogger("relaymq.store")

# Queues are named by their base class (`dispatch.consumer.QueueBase`, which every
# queue type extends) so the compiled writer reads their key and destination and
# calls `enqueue` natively; this module stays below `dispatch.queue`.


class Batch(Protocol):
    """What the writer needs of a unit of work (`router.SendBatch` is one)."""

    ops: list[StoreOp]
    placed: list[tuple[QueueBase, QueueEntry]]
    events: list[Any] | None

    def abandon(self) -> None: ...


class _Ops:
    """A unit of work that is only store operations and events (`StoreWriter.write`)."""

    __slots__ = ("ops", "placed", "events")

    def __init__(self, ops: list[StoreOp], events: list[Any] | None) -> None:
        self.ops = ops
        self.placed: list[tuple[QueueBase, QueueEntry]] = []
        self.events = events

    def abandon(self) -> None:
        self.ops = []


#: waits until the store is under `storeUsage` (or raises `ResourceLimitExceeded`)
StoreSpace = Callable[[], Awaitable[None]]

#: a turn's work is written as several store batches (records) past these sizes,
#: split between units of work (never inside one); stores still sync them once
RECORD_OPS: Final = 256
RECORD_BYTES: Final = 64 << 10


def _chunks(batches: list[Batch]) -> list[list[StoreOp]]:
    """The turn's batches cut into store writes of about `RECORD_OPS` operations
    or `RECORD_BYTES` of messages, at batch boundaries."""
    out: list[list[StoreOp]] = []
    cur: list[StoreOp] = []
    size = 0
    for b in batches:
        ops = b.ops
        if not ops:
            continue
        if cur and (len(cur) >= RECORD_OPS or size >= RECORD_BYTES):
            out.append(cur)
            cur = []
            size = 0
        cur.extend(ops)
        for op in ops:
            if op.__class__ is AddMessage:
                size += op.message.size  # type: ignore[union-attr]
    if cur:
        out.append(cur)
    return out


def added_events(placed: list[tuple[QueueBase, QueueEntry]], out: list[ChangeEvent]) -> None:
    """One `MessageAdded` per message of `placed` (a topic fan-out's placements of
    one message are consecutive)."""
    n = len(placed)
    if n == 1:
        queue, entry = placed[0]
        msg = entry.message
        out.append(added(msg, msg.destination or queue.destination, ((queue.key, entry.seq),),
                         msg.origin))
        return
    i = 0
    while i < n:
        queue, entry = placed[i]
        msg = entry.message
        spots = [(queue.key, entry.seq)]
        i += 1
        while i < n and placed[i][1].message is msg:
            q2, e2 = placed[i]
            spots.append((q2.key, e2.seq))
            i += 1
        out.append(added(msg, msg.destination or queue.destination, tuple(spots), msg.origin))


def removal_origin(entry: QueueEntry) -> str | None:
    """The peer whose connection settled `entry` (None: a local client or the broker)."""
    consumer: Any = entry.consumer
    if consumer is None:
        return None
    conn = consumer.connection
    return conn.origin if conn is not None else None  # type: ignore[no-any-return]


class StoreWriter:
    def __init__(self, store: PersistenceAdapter, feed: ChangeFeed,
                 store_limit: Callable[[], int], store_space: StoreSpace) -> None:
        self.store = store
        self.feed = feed
        self._store_limit = store_limit
        self._store_space = store_space
        self._batches: list[Batch] = []
        #: this turn's removals: destination key -> sequences, in the order handed over
        #: (no object per acknowledgement; `removal_ops` makes the store operations)
        self._removes: dict[str, list[int]] = {}
        self._runs = bool(getattr(store, "removal_runs", False))
        self._events: list[ChangeEvent] = []
        self._future: asyncio.Future[None] | None = None
        self._tail: asyncio.Future[None] | None = None  # the last write started
        self.writes = 0  # store writes made (monitoring, tests)
        #: while store writes fail: the reasons logged (each once while they keep
        #: failing, a client or a mirror source trying again makes no new line), and
        #: the writes that failed; cleared when a write succeeds again
        self._failures = RepeatedFailures()
        #: None, or ``hold(batch, future) -> future``: what client work waits on may
        #: be extended (a ``sync`` mirror holds sends until its target accepted
        #: them); `batch` is None for an acknowledgement's removal
        self.hold: Any = None

    def _pending(self) -> asyncio.Future[None]:
        fut = self._future
        if fut is None:
            loop = asyncio.get_running_loop()
            fut = self._future = loop.create_future()
            loop.call_soon(self._flush)
        return fut

    # -- what the broker hands over ---------------------------------------------------
    def commit_soon(self, batch: Batch) -> asyncio.Future[None]:
        """Store `batch` with everything else of this loop turn, then publish its
        events and make its messages visible. The future completes when it is
        stored (the same future for the whole turn). A message the store's record
        cannot keep (`unstorable_field`) fails this batch alone, before it joins
        the turn's write with other producers' work."""
        for op in batch.ops:
            if op.__class__ is AddMessage:
                bad = unstorable_field(op.message)  # type: ignore[union-attr]
                if bad is not None:
                    return self._refuse(batch, bad)
        fut = self._pending()
        self._batches.append(batch)
        feed = self.feed
        if feed.active:
            if batch.events:
                self._events.extend(batch.events)
            if feed.watch_added and batch.placed:
                added_events(batch.placed, self._events)
        hold = self.hold
        return fut if hold is None else hold(batch, fut)

    def _refuse(self, batch: Batch, field: str) -> asyncio.Future[None]:
        log.warning("a send was refused: its message's %s is out of the range the store "
                    "keeps (a 64-bit integer)", field)
        try:
            batch.abandon()
        except Exception:  # noqa: BLE001 - the send is refused all the same
            log.exception("abandoning a refused send's work failed")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_exception(MessageFormatError(
            f"the message's {field} is out of the range the store keeps "
            f"({-(1 << 63)} to {(1 << 63) - 1})"))
        fut.exception()  # retrieved: the sender gets it when it awaits
        return fut

    async def commit(self, batch: Batch) -> None:
        await self.commit_soon(batch)

    async def write(self, ops: Sequence[StoreOp], events: Iterable[ChangeEvent] = ()) -> None:
        """Store `ops` (with this turn's other work), then publish `events`."""
        evs = list(events) if self.feed.active else None
        if not ops:  # nothing to store: no need to wait a turn (note keeps the order)
            for ev in evs or ():
                self.note(ev)
            return
        batch = _Ops(list(ops), evs or None)
        if batch.ops or batch.events or self._future is not None:
            await self.commit_soon(batch)

    def remove(self, queue: QueueBase, entry: QueueEntry,
               reason: str) -> asyncio.Future[None] | None:
        """`entry` left `queue` for `reason` (a `RemovalReason`): its store record
        goes with this turn's write. Returns that write's future (None when the
        message was never stored)."""
        feed = self.feed
        if not entry.stored:
            if feed.watch_removed:
                ev = removed(entry.message, queue.destination, queue.key, entry.seq, reason,
                             removal_origin(entry))
                tail = self._tail
                if self._future is None and not feed.capturing and (tail is None or tail.done()):
                    feed.publish_one(ev)  # nothing under way to wait for
                else:
                    self._pending()
                    self._events.append(ev)
            return None
        fut = self._pending()
        self._removing(queue.key, entry.seq)
        if feed.watch_removed:
            self._events.append(removed(entry.message, queue.destination, queue.key, entry.seq,
                                        reason, removal_origin(entry)))
        hold = self.hold
        return fut if hold is None else hold(None, fut)

    def remove_stored(self, queue: QueueBase, seq: int, reason: str,
                      message: Message | None) -> asyncio.Future[None]:
        """A message only in the store (paged out, never loaded) leaves `queue`.
        Its `MessageRemoved` carries `message` when the caller read it, else a
        message with only its destination."""
        fut = self._pending()
        self._removing(queue.key, seq)
        if self.feed.watch_removed:
            dest = queue.destination
            msg = message if message is not None else Message(b"", destination=dest)
            self._events.append(removed(msg, dest, queue.key, seq, reason, None))
        return fut

    def _removing(self, key: str, seq: int) -> None:
        """Add `seq` to this turn's removals from destination `key`."""
        seqs = self._removes.get(key)
        if seqs is None:
            self._removes[key] = [seq]
        else:
            seqs.append(seq)

    def note(self, event: ChangeEvent) -> None:
        """An event of work that needed no store write: published now, or after the
        writes already under way (so the feed keeps the order things happened in)."""
        feed = self.feed
        if not feed.active:
            return
        if self._future is None and not feed.capturing and (
                self._tail is None or self._tail.done()):
            feed.publish_one(event)
            return
        self._pending()
        self._events.append(event)

    def publish_visible(self, batch: SendBatch) -> None:
        """A send that needed no store write becomes visible now: its events first
        (a consumer may settle it while it is enqueued)."""
        placed = batch.placed
        if len(placed) == 1:
            queue, entry = placed[0]
            msg = entry.message
            self.feed.publish_one(added(msg, msg.destination or queue.destination,
                                        ((queue.key, entry.seq),), msg.origin))
            queue.enqueue(entry)
            return
        events: list[ChangeEvent] = []
        added_events(placed, events)
        self.feed.publish(events)
        for queue, entry in placed:
            queue.enqueue(entry)

    async def settled(self) -> None:
        """Return once everything handed over so far is stored and visible (or
        failed: its callers see the error). A reader that subscribes to the change
        feed and then reads queues and store waits here in between: a send handed
        over before the subscription made no event, and is not visible yet."""
        last = self._future or self._tail
        if last is not None and not last.done():
            await asyncio.wait([last])

    @property
    def busy(self) -> bool:
        """A write is pending or under way."""
        return self._future is not None or (self._tail is not None and not self._tail.done())

    # -- the group commit ---------------------------------------------------------------
    def _flush(self) -> None:
        batches, self._batches = self._batches, []
        runs, self._removes = self._removes, {}
        events, self._events = self._events, []
        fut, self._future = self._future, None
        assert fut is not None
        try:
            self._start(batches, runs, events, fut)
        except BaseException as exc:  # noqa: BLE001 - the turn's waiters must learn of it
            self._fail_turn(batches, fut, exc, "preparing")

    def _start(self, batches: list[Batch], runs: dict[str, list[int]],
               events: list[ChangeEvent], fut: asyncio.Future[None]) -> None:
        """Cut the turn's work into store writes and start writing them."""
        removes = removal_ops(runs, self._runs) if runs else []
        capturing = self.feed.capturing
        staged = None
        if len(batches) == 1:
            chunks = [batches[0].ops] if batches[0].ops else []
        elif events and capturing:
            chunks = [[op for b in batches for op in b.ops]]  # events and work: one batch
        else:
            chunks = _chunks(batches)
        if events and capturing:
            ops = list(chunks[-1]) if chunks else []
            staged = [(c, c.capture(events, ops)) for c in capturing]
            if chunks:
                chunks[-1] = ops
            elif ops:
                chunks = [ops]
        prev = self._tail
        if not chunks and not removes and (prev is None or prev.done()):
            self._finish(batches, events, staged, fut, None)
            return
        self._tail = asyncio.ensure_future(
            self._write(chunks, removes, batches, events, staged, fut, prev))

    async def _write(self, chunks: list[list[StoreOp]], removes: list[StoreOp],
                     batches: list[Batch], events: list[ChangeEvent], staged: Any,
                     fut: asyncio.Future[None], prev: asyncio.Future[None] | None) -> None:
        error: BaseException | None = None
        store = self.store
        try:
            limit = self._store_limit()
            if limit and store.size() >= limit and any(
                    op.__class__ is AddMessage for ops in chunks for op in ops):
                if removes:  # acks free space: never hold them behind waiting producers
                    await store.write(removes)
                    removes = []
                await self._store_space()
            if removes:
                if chunks:
                    chunks[-1] = chunks[-1] + removes
                else:
                    chunks = [removes]
            self.writes += len(chunks)
            if len(chunks) == 1:
                await store.write(chunks[0])
            else:  # issued in order; the store syncs them together
                await asyncio.gather(*[store.write(ops) for ops in chunks])
        except BaseException as exc:  # noqa: BLE001 - handed to every waiter
            error = self._store_error(exc, sum(len(c) for c in chunks) + len(removes))
        else:
            if self._failures.count:
                log.info("store writes succeed again, after %d failed",
                         self._failures.succeeded())
        try:
            if prev is not None and not prev.done():
                await asyncio.wait([prev])  # earlier writes become visible first
        except BaseException as exc:  # noqa: BLE001 - cancelled while waiting (stopping)
            if error is None:
                error = exc
        self._finish(batches, events, staged, fut, error)

    def _finish(self, batches: list[Batch], events: list[ChangeEvent], staged: Any,
                fut: asyncio.Future[None], error: BaseException | None) -> None:
        """Settle the turn: on success publish its events and make its messages
        visible, then complete `fut`; on failure abandon its batches and fail `fut`.
        `fut` is completed whatever raises on the way: what was written stays
        written, and a client waiting on it must not wait for ever."""
        if error is not None:
            self._fail_turn(batches, fut, error, None)
            return
        try:
            if staged:
                for cursor, items in staged:
                    cursor.committed(items)
            if events:
                self.feed.publish(events)
        except Exception:  # noqa: BLE001 - stored: the senders still succeed
            log.exception("publishing the change-feed events of a store write failed")
        for b in batches:
            placed = b.placed
            for i in range(len(placed)):
                queue, entry = placed[i]
                try:
                    queue.enqueue(entry)
                except Exception:  # noqa: BLE001 - one queue's failure is not the senders'
                    log.exception("making a stored message visible on %s failed (it stays "
                                  "stored; its sender is told it is stored)", queue.destination)
        if not fut.done():
            fut.set_result(None)

    def _fail_turn(self, batches: list[Batch], fut: asyncio.Future[None],
                   error: BaseException, stage: str | None) -> None:
        """Fail the turn's waiters with `error` (`stage`: the writer's own step that
        raised, logged here; a store error was logged by `StoreWriter._store_error`)."""
        if stage is not None and not isinstance(error, asyncio.CancelledError):
            log.error("%s a store write failed; its sends and acknowledgements fail",
                      stage.capitalize(), exc_info=error)
            if not isinstance(error, RelayMQError):
                wrapped = StoreWriteError(f"the broker could not store this: "
                                          f"{type(error).__name__}: {error}")
                wrapped.__cause__ = error
                error = wrapped
        for b in batches:
            try:
                b.abandon()
            except Exception:  # noqa: BLE001 - the others are still abandoned
                log.exception("abandoning a failed send's work failed")
        if not fut.done():
            if isinstance(error, asyncio.CancelledError):
                fut.cancel()
            else:
                fut.set_exception(error)
                fut.exception()  # retrieved: removals' futures are often not awaited


    def _store_error(self, exc: BaseException, ops: int) -> BaseException:
        """What the waiters of a failed store write get: the store's own RelayMQ
        error (a full store, a lost lock), else a `StoreWriteError` naming the cause
        (an `OSError` from a full disk, a database driver's error). Logged here,
        unless the store already reported it (its own `StoreWriteError`): an ERROR
        once per distinct reason while writes keep failing (a disk that refuses
        writes fails every attempt of a client or mirror source that tries again),
        DEBUG when the same reason repeats; again once a write succeeded between."""
        if isinstance(exc, asyncio.CancelledError):
            return exc
        if isinstance(exc, StoreWriteError):
            self._failures.failed()
            return exc
        reason = f"{type(exc).__name__}: {exc}"
        if not self._failures.failed(reason):
            log.debug("store write of %d operation(s) failed again: %s", ops, reason)
        else:
            log.error("store write of %d operation(s) failed; its sends and acknowledgements "
                      "fail: %s (logged once while store writes keep failing so)", ops, reason)
        if isinstance(exc, RelayMQError):
            return exc
        err = StoreWriteError(f"the store could not write this: {reason}")
        err.__cause__ = exc
        return err

