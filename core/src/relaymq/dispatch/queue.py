"""A queue: pending messages, consumers, dispatch, settlement and paging.

Topic subscriptions are queues too (`SubscriptionQueue`), so prefetch, acks,
redelivery and dead-lettering behave the same everywhere.

Dispatch runs synchronously when something changes (a message arrives, credit is
granted, a delivery is settled) and hands deliveries to `Consumer.on_message`.
Only a window of `maxPageSize` pending messages is scanned when selectors or
message groups make some messages wait for a particular consumer.

`Queue` is also the base of queue types (`relaymq.queue_types` entry points, see
docs/plugin-author-guide.md): the compiled build allows interpreted subclasses,
and compiled callers reach overridden public methods through the class's method
table, so an override in a plugin takes effect on every path.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from mypy_extensions import mypyc_attr

from relaymq.config.model import PolicyEntryConfig
from relaymq.dispatch.batch import SendBatch
from relaymq.dispatch.browse import PAGE, BrowseCursor
from relaymq.dispatch.consumer import CONSUMER_LEFT, ROLLED_BACK, Consumer, NackMode, QueueBase
from relaymq.dispatch.entry import PendingList, QueueEntry
from relaymq.dispatch.redelivery import DEFAULT_FAILED_POLICY, RedeliveryPolicy, RedeliveryPolicyMap
from relaymq.dispatch.services import QueueServices
from relaymq.dispatch.stats import DestinationStatistics
from relaymq.feed.events import RemovalReason
from relaymq.feed.feed import ChangeFeed
from relaymq.model.destination import Destination
from relaymq.model.message import Message, SelectorView, now_millis
from relaymq.spi.persistence import AddMessage, StoredMessage

log = logging.getLogger("relaymq.dispatch")
#: releases of one message after which the broker says so in its log (once)
RELEASE_WARNING: Final = 1000

if TYPE_CHECKING:
    from collections.abc import Awaitable, Collection

ACKED: Final = RemovalReason.ACKED
KILLED: Final = RemovalReason.KILLED
PURGED: Final = RemovalReason.PURGED
REPLACED: Final = RemovalReason.REPLACED


@mypyc_attr(allow_interpreted_subclasses=True)
class Queue(QueueBase):
    """Point-to-point delivery with competing consumers; the "standard" queue type."""

    kind = "queue"

    def __init__(self, region: QueueServices, destination: Destination, key: str,
                 policy: PolicyEntryConfig, last_seq: int = 0) -> None:
        self.region = region
        self.destination = destination
        self.key = key
        self.policy = policy
        self.pending = PendingList(policy.prioritized_messages)
        self.consumers: list[Consumer] = []
        self.browsers: list[Consumer] = []
        self.groups: dict[str, Consumer] = {}
        self.stats = DestinationStatistics()
        self.last_seq = last_seq
        #: the change feed; removals build events only while it watches them
        self.feed: ChangeFeed = region.feed
        self.memory_limit = policy.memory_limit or region.usage.memory.limit
        # The in-memory window for stored messages: a share of the limits (ActiveMQ's
        # cursorMemoryHighWaterMark) and at most storeCursorMemoryLimit, so a backlog
        # of persistent messages costs the store's disk, not the broker's memory.
        high_water = max(1, min(policy.cursor_memory_high_water_mark, 100)) / 100
        window = int(self.memory_limit * high_water)
        if policy.store_cursor_memory_limit > 0:
            window = min(window, policy.store_cursor_memory_limit)
        self._window = window
        self._system_window = int(region.usage.memory.limit * high_water)
        self.deleted = False
        #: durable messages here are written to the store
        self.persists = region.store_persistent
        self._rr = 0
        #: consumers of more than one priority: higher ones are served first
        self._priorities = False
        self._dispatching = False
        self._again = False
        # Paging: persistent messages beyond the memory window stay in the store.
        self._paging = False
        self._paging_in = False
        self._loaded_seq = 0
        #: stored messages left in the store because the queue was paging: a page-in
        #: whose read began before one of them cannot have seen it
        self._left_in_store = 0
        self._unplaced: set[int] = set()
        self._space_waiters: list[asyncio.Future[None]] = []
        self._browse_cursors: dict[int, BrowseCursor] = {}
        #: the name of the queue type that made this queue (`relaymq.queue_types`)
        self.queue_type = "standard"
        #: paused by management: consumers wait in `_held`, so dispatch finds none
        #: (no check on the per-message path)
        self.paused = False
        self._held: list[Consumer] = []
        self._generation = 0  # bumped by a purge: a page-in read before it is stale
        #: a queue type that chooses consumers itself sets this; then every message
        #: goes through `select_consumer` (no single-consumer fast path)
        self.custom_choice = False

    # -- arrival -------------------------------------------------------------------
    def next_seq(self) -> int:
        self.last_seq += 1
        return self.last_seq

    def prepare(self, message: Message, batch: SendBatch) -> None:
        """Give `message` a sequence number on this queue and add it to `batch`;
        it becomes visible when the batch commits (`enqueue`)."""
        seq = self.next_seq()
        stored = message.durable and self.persists
        entry = QueueEntry(seq, message, stored)
        if stored:
            batch.ops.append(AddMessage(self.key, seq, message))
            self._unplaced.add(seq)
        batch.placed.append((self, entry))

    def discard(self, entry: QueueEntry) -> None:
        """A prepared entry whose batch was abandoned (transaction rolled back)."""
        self._unplaced.discard(entry.seq)

    def enqueue(self, entry: QueueEntry) -> None:
        if self.deleted:
            return
        stats = self.stats
        stats.enqueued += 1
        stats.pending += 1
        if entry.stored:
            self._unplaced.discard(entry.seq)
        if entry.stored and (self._paging or self._over_window()):
            if entry.seq > self._loaded_seq:
                if not self._paging:
                    self._paging = True
                self._left_in_store += 1
                return  # stays in the store; paged in when the window has room
        if entry.stored and entry.seq > self._loaded_seq:
            # the page-in cursor counts stored messages only: a non-persistent one
            # arriving while a backlog is paged out must not move it past them
            self._loaded_seq = entry.seq
        n = entry.message.size  # _hold, inlined on the per-message path
        stats.memory_used += n
        self.region.usage.memory.used += n
        consumers = self.consumers
        if (len(consumers) == 1 and not self.pending.count and not self._dispatching
                and not self.custom_choice):
            # Fast path: one consumer with room, nothing waiting ahead of this message.
            c = consumers[0]
            msg = entry.message
            if (c.selector is None and msg.group_id is None and not self.groups
                    and c.capacity() > 0 and not (msg.expiration and msg.is_expired())):
                self._dispatching = True
                try:
                    self._deliver(c, entry)
                finally:
                    self._dispatching = False
                if self._again or self.browsers:
                    self.dispatch()
                return
        self.pending.append(entry)
        self.dispatch()

    def _hold(self, entry: QueueEntry) -> None:
        n = entry.message.size
        self.stats.memory_used += n
        self.region.usage.memory.add(n)

    def _unhold(self, entry: QueueEntry) -> None:
        n = entry.message._size or entry.message.size  # computed when it was held
        self.stats.memory_used -= n
        memory = self.region.usage.memory
        memory.used -= n
        if memory.waiters or self._space_waiters:  # producers wait for this room
            memory.sub(0)
            if self._space_waiters and not self.is_full():
                for f in self._space_waiters:
                    if not f.done():
                        f.set_result(None)
                self._space_waiters.clear()

    def _over_window(self) -> bool:
        return (self.stats.memory_used > self._window
                or self.region.usage.memory.used > self._system_window)

    def is_full(self) -> bool:
        """Producers of non-persistent messages wait while this is true."""
        return self.policy.producer_flow_control and self.stats.memory_used >= self.memory_limit

    async def wait_for_space(self) -> None:
        while self.is_full() and not self.deleted:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._space_waiters.append(fut)
            await fut

    # -- paging ----------------------------------------------------------------------
    def _maybe_page_in(self) -> None:
        if self._paging and not self._paging_in and len(self.pending) < self.policy.max_page_size:
            self._paging_in = True
            asyncio.get_running_loop().create_task(self._page_in())

    async def _page_in(self) -> None:
        try:
            pending = self.pending
            while self._paging and not self.deleted:
                limit = self._page_limit()
                generation = self._generation
                left = self._left_in_store
                records = await self.region.store.read(self.key, self._loaded_seq, limit)
                if generation != self._generation:
                    continue  # purged while reading: read again past the purge
                for rec in records:
                    if len(pending) and self._over_window():
                        break  # the window is full: the rest is read again later
                    if rec.seq <= self._loaded_seq:
                        continue  # in memory already (or consumed): read by another round
                    self._loaded_seq = rec.seq
                    if rec.seq in self._unplaced:
                        continue  # its own enqueue is about to add it
                    entry = QueueEntry(rec.seq, rec.message, True)
                    self._hold(entry)
                    pending.append(entry)
                else:
                    # the store had no more when the read began; a message stored since
                    # is read on the next round
                    if len(records) < limit and self._left_in_store == left:
                        self._paging = False
                self.dispatch()
                if self._over_window() or len(pending) >= self.policy.max_page_size:
                    break
        finally:
            self._paging_in = False

    def _page_limit(self) -> int:
        """Messages to read at once: five pages, or what the window has room for
        (judged by the messages held now), so a small window reads little."""
        limit = max(self.policy.max_page_size * 5, 1000)
        held = len(self.pending)
        if held:
            room = self._window - self.stats.memory_used
            per_message = max(self.stats.memory_used // held, 1)
            limit = max(1, min(limit, room // per_message + 1))
        return limit

    async def recover(self) -> int:
        """Load the first window of stored messages after a restart."""
        stats = await self.region.store.stats(self.key)
        self.last_seq = max(self.last_seq, stats.last_seq)
        self.stats.pending = stats.count
        if stats.count:
            self._paging = True
            self._loaded_seq = 0
            # one page-in at a time: the dispatch it makes must not start another
            # (`_maybe_page_in`) reading the same stretch of the store
            self._paging_in = True
            await self._page_in()
        return stats.count

    async def read_stored(self, after: int = 0, limit: int = 1000) -> list[StoredMessage]:
        """This queue's stored messages with a sequence number above `after`, in
        sequence order, at most `limit`: those in memory and those only in the store
        (paged out), for a queue type that must see every one (at recovery)."""
        return await self.region.store.read(self.key, after, limit)

    # -- consumers ---------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        consumer.queue = self
        if consumer.browser:
            self._start_browse(consumer)
            return
        consumers = self._held if self.paused else self.consumers
        consumers.append(consumer)
        consumers.sort(key=lambda c: -c.priority)
        self._priorities = consumers[0].priority != consumers[-1].priority
        self.stats.consumers = len(consumers)
        self.dispatch()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer.browser:
            if consumer in self.browsers:
                self.browsers.remove(consumer)
            self._browse_cursors.pop(consumer.id, None)
            return
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            cs = self.consumers
            self._priorities = bool(cs) and cs[0].priority != cs[-1].priority
        elif consumer in self._held:
            self._held.remove(consumer)
        self.stats.consumers = len(self.consumers) + len(self._held)
        for gid in [g for g, c in self.groups.items() if c is consumer]:
            del self.groups[gid]
        returned = list(consumer.inflight.values())
        consumer.inflight.clear()
        self.return_unacked(returned, CONSUMER_LEFT)

    def return_unacked(self, entries: list[QueueEntry], cause: str = CONSUMER_LEFT) -> None:
        """Deliveries that ended without an ack go back at once (no delay) ahead of
        newer messages, marked redelivered. An acknowledgement rolled back with its
        transaction (`cause` ROLLED_BACK) is a failed delivery, as ActiveMQ's
        redelivery policy counts it: one that used up the policy (or, without a
        matching one, the default of 6) is dead-lettered. A consumer that left
        (CONSUMER_LEFT) failed nothing the broker can tell: what it held may never
        have reached the application (a prefetch), so it is not counted."""
        if cause != ROLLED_BACK:
            self.requeue(entries)
            return
        pmap = self.region.redelivery
        policy = pmap.policy_for(self.destination) if pmap is not None else None
        if policy is None:
            policy = DEFAULT_FAILED_POLICY
        back = []
        for entry in entries:
            if not policy.exceeded(entry.failures + 1):
                back.append(entry)
                continue
            self._out_of_flight(entry)
            entry.delivery_count += 1
            self._retries_used_up(entry, pmap, policy, f": {cause}")
        self.requeue(back)

    def _out_of_flight(self, entry: QueueEntry) -> None:
        """`entry` is no longer held by a consumer (settled negatively, or taken)."""
        self.stats.in_flight -= 1
        entry.consumer = None

    def _retries_used_up(self, entry: QueueEntry, pmap: RedeliveryPolicyMap | None,
                         policy: RedeliveryPolicy, cause: str) -> None:
        """`entry` failed past `policy`: dead-lettered, or dropped when the policy map
        says `sendToDlqIfMaxRetriesExceeded="false"`."""
        if pmap is None or pmap.send_to_dlq_if_max_retries_exceeded:
            self.dead_letter(entry, f"max redeliveries ({policy.maximum_redeliveries}) "
                             f"exceeded{cause}")
        else:
            self._drop(entry, KILLED)

    def requeue(self, entries: list[QueueEntry], unbound: bool = False) -> None:
        """Put deliveries back ahead of newer messages, marked redelivered, without
        dead-lettering any (a queue type that counts them itself), then dispatch.
        `unbound`: the broker unbound their consumer (a queue type's partition count
        change), so these deliveries did not fail: a redelivery policy or
        `maxRedelivery` does not count them (`QueueEntry.failures`)."""
        for entry in sorted(entries, key=lambda e: e.seq, reverse=True):
            entry.consumer = None
            entry.delivery_count += 1
            if unbound:
                entry.unbound += 1
            self.stats.in_flight -= 1
            self.pending.put_back(entry)
        self.dispatch()

    def _active_consumers(self) -> list[Consumer]:
        consumers = self.consumers
        for c in consumers:
            if c.exclusive:
                return [c]  # the first exclusive consumer receives; the others stand by
        return consumers

    def bound_consumers(self) -> list[Consumer]:
        """Every consumer bound to the queue (browsers aside), by priority, then in
        bind order: those of a paused queue too, which keep their places but receive
        nothing until it resumes (`consumers` is empty meanwhile)."""
        return self._held if self.paused else self.consumers

    def active_consumers(self) -> list[Consumer]:
        """The consumers that receive now (management's "active" flag; Solace's active
        flow indication): the first exclusive consumer alone, else every consumer; a
        paused queue's are none. Queue types with their own choice override it."""
        return list(self._active_consumers())

    def partitions_of(self, consumer: Consumer) -> list[int] | None:
        """The partitions `consumer` owns on a partitioned queue type; None on a queue
        without partitions."""
        return None

    # -- dispatch -----------------------------------------------------------------------
    def dispatch(self) -> None:
        if self._dispatching:
            self._again = True
            return
        self._dispatching = True
        try:
            while True:
                self._again = False
                if self.pending and self.consumers:
                    self._dispatch_once()
                if self.browsers:
                    for b in list(self.browsers):
                        self._pump_browser(b)
                if not self._again:
                    break
        finally:
            self._dispatching = False
        if self._paging:
            self._maybe_page_in()

    def _dispatch_once(self) -> None:
        custom = self.custom_choice
        consumers = self.dispatch_consumers() if custom else self._active_consumers()
        now = now_millis()
        pending = self.pending
        if len(consumers) == 1 and consumers[0].selector is None and not self.groups and not custom:
            c = consumers[0]
            cap = c.capacity()
            take = pending.pop_ungrouped
            while cap > 0:
                head = take()
                if head is None:
                    break  # empty, or message groups need the general path
                exp = head.message.expiration
                if exp and exp <= now:
                    self._expire(head)
                    continue
                self._deliver(c, head)
                cap = c.capacity()
            if cap <= 0 or not pending or pending.peek().message.group_id is None:  # type: ignore[union-attr]
                return
        total = sum(max(c.capacity(), 0) for c in consumers)
        if total <= 0:
            return
        plain = all(c.selector is None for c in consumers) and not self.groups and not custom
        limit = total if plain else max(self.policy.max_page_size, total)
        n = len(consumers)
        for entry in pending.window(limit):
            exp = entry.message.expiration
            if exp and exp <= now:
                pending.remove(entry)
                self._expire(entry)
                continue
            target = (self.select_consumer(entry, consumers) if custom
                      else self._choose(entry, consumers, n))
            if target is None:
                if total <= 0:
                    break
                continue
            pending.remove(entry)
            self._deliver(target, entry)
            total -= 1
            if total <= 0:
                break

    def select_consumer(self, entry: QueueEntry, consumers: list[Consumer]) -> Consumer | None:
        """The consumer `entry` goes to now, or None to keep it waiting; called for every
        message of a queue type that sets `custom_choice` (partitions, exclusive access).
        `consumers` are those `dispatch_consumers` gave; a chosen consumer must have
        `capacity() > 0`."""
        return self._choose(entry, consumers, len(consumers))

    def dispatch_consumers(self) -> list[Consumer]:
        """The consumers a dispatch of a queue type that sets `custom_choice` hands to
        `select_consumer`, and whose room bounds it: every consumer. A type narrows it
        to those that may receive now (an exclusive queue: its active consumer); the
        type's choice replaces ActiveMQ's exclusive-consumer option here."""
        return self.consumers

    def _choose(self, entry: QueueEntry, consumers: list[Consumer], n: int) -> Consumer | None:
        gid = entry.message.group_id
        if gid is not None:
            owner = self.groups.get(gid)
            if owner is not None and not owner.closed and owner in consumers:
                # the group's consumer gets it only through its selector (as ActiveMQ
                # selects first, then assigns the group); the others never do
                if owner.capacity() <= 0:
                    return None
                sel = owner.selector
                if sel is not None and not sel.matches(SelectorView(entry.message,
                                                                    entry.delivery_count)):
                    return None
                return owner
        if self._priorities and n > 1:
            return self._choose_by_priority(entry, consumers, n, gid)
        view = None
        start = self._rr
        for i in range(n):
            c = consumers[(start + i) % n]
            if c.capacity() <= 0:
                continue
            sel = c.selector
            if sel is not None:
                if view is None:
                    view = SelectorView(entry.message, entry.delivery_count)
                if not sel.matches(view):
                    continue
            self._rr = (start + i + 1) % n
            if gid is not None:
                self.groups[gid] = c
            return c
        return None

    def _choose_by_priority(self, entry: QueueEntry, consumers: list[Consumer], n: int,
                            gid: str | None) -> Consumer | None:
        """ActiveMQ's consumer priority: the highest priority with room (and a
        matching selector) gets the message, round robin among equals; a lower
        priority only when every higher one is full. `consumers` are sorted by
        priority, highest first."""
        view = None
        lo = 0
        while lo < n:
            level = consumers[lo].priority
            hi = lo + 1
            while hi < n and consumers[hi].priority == level:
                hi += 1
            m = hi - lo
            start = self._rr % m
            for i in range(m):
                c = consumers[lo + (start + i) % m]
                if c.capacity() <= 0:
                    continue
                sel = c.selector
                if sel is not None:
                    if view is None:
                        view = SelectorView(entry.message, entry.delivery_count)
                    if not sel.matches(view):
                        continue
                self._rr = start + i + 1
                if gid is not None:
                    self.groups[gid] = c
                return c
            lo = hi
        return None

    def _deliver(self, consumer: Consumer, entry: QueueEntry) -> None:
        delivery = consumer._took(entry)
        self.stats.dispatched += 1
        self.stats.in_flight += 1
        msg = entry.message
        if msg.group_id is not None and msg.group_seq == -1:
            self.groups.pop(msg.group_id, None)  # the group is closed
        consumer.on_message(delivery)
        if consumer.drain_requested and consumer.credit <= 0:
            consumer.drain_requested = False
            if consumer.on_drained is not None:
                consumer.on_drained()

    def drain(self, consumer: Consumer) -> None:
        """AMQP drain: deliver what is available, then use up the remaining credit."""
        consumer.drain_requested = True
        self.dispatch()
        if consumer.drain_requested:
            consumer._finish_drain()

    # -- browsing -----------------------------------------------------------------------
    def _start_browse(self, browser: Consumer) -> None:
        """Show `browser` what the queue holds now, in sequence order: the messages
        in memory (waiting or in flight) and those only in the store (paged out)."""
        now = now_millis()
        sel = browser.selector

        def accept(e: QueueEntry) -> bool:
            return not e.message.is_expired(now) and (
                sel is None or sel.matches(SelectorView(e.message, e.delivery_count)))

        held = [e for c in self.consumers for e in c.inflight.values()]
        memory = [e for e in list(self.pending) + held if accept(e)]
        after = self._loaded_seq if self._paging else self.last_seq
        self._browse_cursors[browser.id] = BrowseCursor(memory, after, self.last_seq, accept)
        self.browsers.append(browser)
        self._pump_browser(browser)

    def _pump_browser(self, browser: Consumer) -> None:
        cursor = self._browse_cursors.get(browser.id)
        if cursor is None:
            return
        while browser.capacity() > 0:
            if cursor.must_read():
                if not cursor.reading:
                    cursor.reading = True
                    asyncio.get_running_loop().create_task(self._browse_read(browser, cursor))
                return
            entry = cursor.next()
            if entry is None:
                del self._browse_cursors[browser.id]
                self.browsers.remove(browser)
                if browser.on_browse_end is not None:
                    browser.on_browse_end()
                return
            if entry.removed:
                continue
            delivery = browser._took(entry)
            browser.on_message(delivery)

    async def _browse_read(self, browser: Consumer, cursor: BrowseCursor) -> None:
        """Read the browser's next page of paged-out messages, then go on browsing."""
        try:
            records = await self.region.store.read(self.key, cursor.after, PAGE)
            cursor.add(records, PAGE)
        except Exception:  # noqa: BLE001 - the store said no: the browse ends with what it saw
            log.exception("browsing %s: reading the store failed", self.destination)
            cursor.after = cursor.upto
        finally:
            cursor.reading = False
        if self._browse_cursors.get(browser.id) is cursor:
            self._pump_browser(browser)

    # -- settlement ---------------------------------------------------------------------
    def acknowledge(self, entry: QueueEntry) -> Awaitable[None] | None:
        fut = self.region.writer.remove(self, entry, ACKED) \
            if entry.stored or self.feed.watch_removed else None
        self.acknowledged(entry)
        if self.pending or self.browsers or self._paging:  # the ack made room for them
            self.dispatch()
        return fut

    def acknowledge_all(self, entries: list[QueueEntry]) -> Awaitable[None] | None:
        """Acknowledge several deliveries (a cumulative ack), then dispatch once
        into the room they made; returns the last store removal, if any."""
        last = None
        writer = self.region.writer
        watch = self.feed.watch_removed
        for entry in entries:
            if entry.stored or watch:
                last = writer.remove(self, entry, ACKED) or last
            self.acknowledged(entry)
        if self.pending or self.browsers or self._paging:
            self.dispatch()
        return last

    def acknowledged(self, entry: QueueEntry) -> None:
        """Forget an acknowledged delivery (its store removal is the caller's)."""
        self._remove_entry(entry)
        stats = self.stats
        stats.dequeued += 1
        stats.in_flight -= 1

    def _remove_entry(self, entry: QueueEntry) -> None:
        entry.removed = True
        entry.consumer = None
        self.stats.pending -= 1
        self._unhold(entry)

    def settle_negative(self, entry: QueueEntry, mode: str) -> None:
        self._out_of_flight(entry)
        cause = ""
        if mode == NackMode.RELEASE:
            entry.releases += 1
            limit = self.policy.maximum_releases
            if limit < 0 or entry.releases <= limit:
                if entry.releases == RELEASE_WARNING:
                    self._warn_releases(entry)
                self.pending.put_back(entry)
                self.dispatch()
                return
            # a hot release loop: this release counts as a failed delivery
            entry.releases = 0
            mode = NackMode.FAILED
            cause = f"; released more than {limit} times in a row (maximumReleases)"
        if mode == NackMode.REJECT:
            self.dead_letter(entry, "rejected by the consumer")
            self.dispatch()  # the consumer has room again: the next message goes
            return
        entry.delivery_count += 1
        pmap = self.region.redelivery
        policy = pmap.policy_for(self.destination) if pmap is not None else None
        if policy is None:
            if mode == NackMode.POISON:
                self.dead_letter(entry, "poison ack: no redelivery policy")
                self.dispatch()
                return
            policy = DEFAULT_FAILED_POLICY
        failures = entry.failures
        if policy.exceeded(failures):
            self._retries_used_up(entry, pmap, policy, cause)
            self.dispatch()
            return
        delay = policy.delay_for(failures)
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self._redeliver, entry)
            self.dispatch()  # the others go meanwhile
        else:
            self._redeliver(entry)

    def _warn_releases(self, entry: QueueEntry) -> None:
        limit = self.policy.maximum_releases
        log.warning("message %s on %s was released %d times in a row by its consumers "
                    "(released is not a failed delivery); %s", entry.message.message_id,
                    self.destination, RELEASE_WARNING,
                    f"past {limit} releases it counts as a failed delivery (maximumReleases)"
                    if limit >= 0 else "maximumReleases is -1: it may go round forever")

    def _redeliver(self, entry: QueueEntry) -> None:
        if entry.removed or self.deleted:
            return
        self.pending.put_back(entry)
        self.dispatch()

    def dead_letter(self, entry: QueueEntry, reason: str, expired: bool = False) -> None:
        self._remove_entry(entry)
        self.region.dead_letter(self, entry, reason, expired)

    def drop(self, entry: QueueEntry, reason: str = KILLED) -> None:
        """Forget a message that is neither pending nor held by a consumer any more (a
        queue type discards it): counted as dequeued, its stored copy removed; the
        change feed reports it removed for `reason` (a `RemovalReason`)."""
        self._drop(entry, reason)

    def _drop(self, entry: QueueEntry, reason: str) -> Awaitable[None] | None:
        """Forget `entry`; returns the store write that deletes its record (None
        when nothing is written)."""
        self._remove_entry(entry)
        self.stats.dequeued += 1
        if entry.stored or self.feed.watch_removed:
            return self.region.writer.remove(self, entry, reason)
        return None

    def _expire(self, entry: QueueEntry) -> None:
        self.stats.expired += 1
        self.region.message_expired(self, entry)
        self.dead_letter(entry, "expired", expired=True)

    def expire_scan(self) -> int:
        """The periodic check (`expireMessagesPeriod`): expire what waits too long."""
        now = now_millis()
        expired = [e for e in self.pending if e.message.is_expired(now)]
        for entry in expired:
            self.pending.remove(entry)
            self._expire(entry)
        return len(expired)

    # -- management ---------------------------------------------------------------------
    def memory_entries(self) -> list[QueueEntry]:
        """What the queue holds in memory (pending and in flight), in sequence order."""
        held = [e for c in self.consumers for e in c.inflight.values()]
        return sorted(list(self.pending) + held, key=lambda e: e.seq)

    def size(self) -> int:
        return self.stats.pending

    def remove_pending(self, entry: QueueEntry, reason: str = REPLACED) -> bool:
        """Remove a message waiting here (not in flight): it is forgotten, its memory
        released and its stored copy deleted. False when it is not pending (a
        consumer holds it, or it is gone). For queue types (a newer last value
        replaces an older one) and management (remove by id)."""
        if entry.removed or entry.consumer is not None or not self.pending.remove(entry):
            return False
        self._drop(entry, reason)
        return True

    def purge(self) -> int:
        entries = list(self.pending)
        for entry in entries:
            self.pending.remove(entry)
            self._drop(entry, PURGED)
        return len(entries)

    def held_entries(self) -> list[QueueEntry]:
        """Deliveries consumers hold unacknowledged (paused consumers included)."""
        return [e for c in self.consumers + self._held for e in c.inflight.values()]

    async def remove_messages(self, seqs: Collection[int], reason: str = KILLED,
                              held: list[int] | None = None) -> int:
        """Remove the messages with these sequence numbers that no consumer holds,
        whether waiting in memory or only in the store (paged out). Returns how many,
        once their removal is stored.
        `reason`: the change feed's `RemovalReason` (`moved` for a move).
        `held`: when given, gets the sequence numbers skipped because a consumer
        holds them (delivered, not settled yet), for a caller that must remove them
        once they are released (a mirror target's postAck)."""
        wanted = set(seqs)
        n = 0
        last: Awaitable[None] | None = None
        pending = self.pending
        if len(wanted) * 4 < len(pending):
            # a few of many (a mirror target's batch of postAcks on a deep queue):
            # looked up by sequence number, not a pass over every waiting message
            found = [e for e in (pending.get(s) for s in sorted(wanted)) if e is not None]
        else:
            found = [e for e in pending if e.seq in wanted]
        for entry in found:
            wanted.discard(entry.seq)
            if entry.removed or entry.consumer is not None or not self.pending.remove(entry):
                if held is not None and entry.consumer is not None and not entry.removed:
                    held.append(entry.seq)
                continue
            written = self._drop(entry, reason)
            if written is not None:
                last = written
            n += 1
        writer = self.region.writer
        skipped: list[int] = held if held is not None else []
        inflight: set[int] = (
            {e.seq for e in self.held_entries()} if held is not None and wanted else set())
        for seq in sorted(wanted):
            if seq <= self._loaded_seq or seq in self._unplaced:
                if seq in inflight:
                    skipped.append(seq)
                continue  # in memory (held by a consumer) or already gone
            last = writer.remove_stored(self, seq, reason, None)
            self.stats.pending -= 1
            self.stats.dequeued += 1
            n += 1
        if last is not None:
            await last
            self._generation += 1  # a page-in that read before the removal reads again
        return n

    async def purge_all(self) -> int:
        """Purge, the store included: every message not held by a consumer is
        removed from memory and from the store (paged-out ones too)."""
        self._generation += 1
        bound = self.last_seq
        self._loaded_seq = max(self._loaded_seq, bound)  # a page-in starts past the purge
        inflight = {e.seq for e in self.held_entries()}
        seen = {e.seq for e in self.pending}
        n = self.purge()
        if not self.persists:
            return n
        after = 0
        store = self.region.store
        stats = self.stats
        last: Awaitable[None] | None = None
        while True:
            records = await store.read(self.key, after, 1000)
            for rec in records:
                seq = rec.seq
                if seq > bound:
                    break
                if seq in inflight or seq in seen or seq in self._unplaced:
                    continue
                last = self.region.writer.remove_stored(self, seq, PURGED, rec.message)
                stats.pending -= 1
                stats.dequeued += 1
                n += 1
            if last is not None:
                await last  # one store write per chunk read
                last = None
            if len(records) < 1000 or records[-1].seq >= bound:
                break
            after = records[-1].seq
        return n

    def pause(self) -> None:
        """Stop dispatching (management): messages wait, consumers stay attached."""
        if not self.paused:
            self.paused = True
            self._held, self.consumers = self.consumers, []

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self.consumers = self._held + self.consumers
            self._held = []
            self.consumers.sort(key=lambda c: -c.priority)
            cs = self.consumers
            self._priorities = bool(cs) and cs[0].priority != cs[-1].priority
            self.dispatch()

    def close_all(self, reason: str) -> None:
        """The destination is going away: detach every consumer."""
        self.deleted = True
        self.consumers = self.consumers + self._held
        self._held = []
        for c in list(self.consumers) + list(self.browsers):
            c.closed = True
            if c.on_closed is not None:
                c.on_closed(reason)
        self.consumers.clear()
        self.browsers.clear()
        for f in self._space_waiters:
            if not f.done():
                f.set_result(None)
        for entry in list(self.pending):
            self._unhold(entry)
        self.pending = PendingList(self.policy.prioritized_messages)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.destination} pending={self.stats.pending}>"
