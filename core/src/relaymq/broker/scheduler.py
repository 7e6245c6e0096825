"""Scheduled delivery (`AMQ_SCHEDULED_DELAY`, `_PERIOD`, `_REPEAT`, `_CRON`) with
`schedulerSupport`.

A scheduled message waits on the event loop's timer; each due copy is routed as
a fresh message with the scheduling fields cleared. A repeat's copy gets the
message id `<job's message id>@<due time>` (`firing_id`): a firing that runs
again after its store write failed keeps its id, and so does the same firing
of the same job on a mirror target.
`AMQ_SCHEDULED_REPEAT` n means n + 1 deliveries, `AMQ_SCHEDULED_PERIOD` apart.
A message property `AMQ_SCHEDULED_CRON` (see `cron.py`) delivers a copy at every
matching minute (plus `AMQ_SCHEDULED_DELAY`), for as long as the broker keeps the
job: as in ActiveMQ, a cron job does not end by itself.

**Durable**: a persistent message on a persistent store is stored before its
producer is acknowledged, under the store key `SCHEDULER_KEY` (a `durable://`
key without a subscription record, so stores list it as neither a destination
nor a subscription). In that stored copy the scheduling fields hold the job's
state: `scheduled_delay` is the absolute due time (epoch ms),
`scheduled_period` the period and `scheduled_repeat` the deliveries still to
come after this one; for a cron job `scheduled_repeat` is -1 and
`scheduled_period` the delay after each cron time (the entry stays in the
message's `AMQ_SCHEDULED_CRON` property). Each firing is one store batch: the delivered copy, the
removal of the job and (for a repeat) the job's next state, so a crash never
loses a job nor delivers one firing twice. After a restart `recover` arms every
stored job; one whose time passed while the broker was down is delivered at once.

**On the change feed**: a job delivered once (no period, repeat or cron) is
announced when it is taken, as a `MessageAdded` without placements whose message
holds the absolute due time in `scheduled_delay` (a persistent one in the same
store batch as the job): a mirror sends it on then, as Artemis mirrors a
scheduled message when it is sent (docs/mirror.md). Its delivered copy keeps the
message id. Repeating and cron jobs are announced the same way (the stored job:
its period and the deliveries still to come; a cron job's entry in the message's
properties, `scheduled_repeat` -1); their copies carry the internal annotation
`SCHEDULED_FIRING` (a mirror does not send them: a target that holds the job
fires its own, with the same ids). A mirror target gives a repeating job its
source's first due time exactly (the internal annotation `SCHEDULED_AT`), so its
copies' ids are the source's.

Non-persistent scheduled messages (or any on a non-persistent store) stay in
memory only, as in ActiveMQ for non-persistent messages they are lost with the
broker.

**What a delivered copy carries**: the message as its producer sent it, without
the `AMQ_SCHEDULED_*` properties (as ActiveMQ removes them, so a copy that goes on
over a network or a mirror is not scheduled again there). A duplicate-detection
id given apart from the message (a mirror target's) stays apart: it belongs to
the job (stored as the private annotation `DUPLICATE_ID_ANNOTATION` of the
stored copy only) and is checked when each copy is routed; it never becomes a
property a consumer sees.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relaymq.broker.connection import SCHEDULED_CRON, SCHEDULED_CRON_MARKER, asks_scheduling
from relaymq.broker.cron import Cron
from relaymq.dispatch.batch import DONE, SendBatch, SendContext
from relaymq.feed.constructors import added
from relaymq.model.message import Message, client_annotations, internal_annotation, now_millis
from relaymq.spi.persistence import AddMessage, RemoveMessage, StoreOp

#: the latest due time: the stored job keeps it in a 64-bit field, so a delay or
#: period that would pass it makes the job due "never" rather than fail its write
_LATEST_DUE = (1 << 63) - 1

if TYPE_CHECKING:
    from relaymq.broker.connection import ClientConnection, ConnectionHost

log = logging.getLogger("relaymq.scheduler")

#: the store key of persisted scheduled messages (no colon: no subscription key is like it)
SCHEDULER_KEY = "durable://relaymq.scheduler"
CRON = SCHEDULED_CRON
PERIOD = "AMQ_SCHEDULED_PERIOD"
REPEAT = "AMQ_SCHEDULED_REPEAT"
_CRON_MARKER = SCHEDULED_CRON_MARKER
#: the properties that ask for scheduling; a delivered copy has none of them
SCHEDULING_PROPERTIES = ("AMQ_SCHEDULED_DELAY", PERIOD, REPEAT, "AMQ_SCHEDULED_START", CRON)
#: the annotation of a stored job holding the duplicate id given apart from its message
DUPLICATE_ID_ANNOTATION = internal_annotation("relaymq_scheduled_duplicate_id")
#: on a cron job's delivered copy: a local delivery of a job every broker that holds
#: it fires itself (a mirror sends the job when it is taken, not each copy)
SCHEDULED_FIRING = internal_annotation("relaymq_scheduled_firing")
#: on a message handed to `Scheduler.schedule`: the job's first due time (epoch ms)
#: as another broker that holds the same job has it (a mirror target's), used as
#: it is instead of now plus the delay, so each copy's id (`firing_id`) is the same
#: on both; not kept with the job
SCHEDULED_AT = internal_annotation("relaymq_scheduled_at")


def firing_id(message: Message, due: int) -> str | None:
    """The message id of a repeating or cron job's copy due at `due` (epoch ms):
    the job's message id and that time. The same firing gets the same id when it
    runs again (its store write failed and the job, still stored, fires after a
    restart) and on another broker that holds the same job (a mirror target), so
    a repeat is dropped by its id and an acknowledgement names the copy on both."""
    if message.message_id is None:
        return None
    return f"{message.message_id}@{due}"


def _first_due(message: Message) -> int | None:
    """The first due time `message` brings (`SCHEDULED_AT`, taken off it), if any."""
    ann = message.annotations
    if not ann or SCHEDULED_AT not in ann:
        return None
    rest = dict(ann)
    at = rest.pop(SCHEDULED_AT)
    message.annotations = rest or None
    if isinstance(at, int) and not isinstance(at, bool):
        return min(max(at, 0), _LATEST_DUE)
    return None


class Job:
    """One scheduled message: what to send, when, and how often."""

    __slots__ = ("message", "conn", "due", "period", "remaining", "seq", "handle", "cron",
                 "duplicate_id")

    def __init__(self, message: Message, conn: ClientConnection | None, due: int, period: int,
                 remaining: int, seq: int | None, cron: Cron | None = None,
                 duplicate_id: str | None = None) -> None:
        self.message = message
        self.conn = conn
        self.due = due  # epoch ms
        self.period = period  # ms
        self.remaining = remaining  # deliveries after the next one
        self.seq = seq  # where it is stored (None: memory only)
        self.handle: asyncio.TimerHandle | None = None
        self.cron = cron  # a cron job: `period` is the delay after each cron time
        self.duplicate_id = duplicate_id  # given apart from the message (a mirror target's)

    def following(self) -> Job | None:
        """The job's next state after it fired, None when it is done."""
        if self.cron is not None:
            due = self.cron.next_after(max(self.due - self.period, now_millis())) + self.period
            return Job(self.message, self.conn, due, self.period, -1, None, self.cron,
                       self.duplicate_id)
        if self.remaining <= 0:
            return None
        return Job(self.message, self.conn, min(self.due + self.period, _LATEST_DUE), self.period,
                   self.remaining - 1, None, None, self.duplicate_id)

    def stored_form(self) -> Message:
        """The copy kept in the store: the message with the job's state in its
        scheduling fields (the encoded bytes are kept as they are)."""
        m = self.message.copy()
        m.scheduled_delay = self.due
        m.scheduled_period = self.period
        m.scheduled_repeat = self.remaining
        if self.duplicate_id is not None:
            ann = dict(m.annotations or {})
            ann[DUPLICATE_ID_ANNOTATION] = self.duplicate_id
            m.annotations = ann
        return m


class Scheduler:
    def __init__(self) -> None:
        self._jobs: set[Job] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._broker: ConnectionHost | None = None
        self._last_seq = 0
        self.pending = 0

    @property
    def persistent(self) -> bool:
        broker = self._broker
        return broker is not None and broker.region.store_persistent

    async def recover(self, broker: ConnectionHost) -> int:
        """Start: arm every stored job (late ones fire at once). Returns how many."""
        self._broker = broker
        if not broker.region.store_persistent:
            return 0
        store = broker.region.store
        self._last_seq = (await store.stats(SCHEDULER_KEY)).last_seq
        stored = await store.read(SCHEDULER_KEY)
        for sm in stored:
            m = sm.message
            cron = None
            if m.scheduled_repeat < 0:
                try:
                    cron = Cron(str(m.properties.get(CRON, "")))
                except Exception:  # noqa: BLE001 - a job that cannot run is dropped, loudly
                    log.exception("scheduler: stored cron job %s is unusable; dropped",
                                  m.message_id)
                    await broker.region.writer.write([RemoveMessage(SCHEDULER_KEY, sm.seq)])
                    continue
            duplicate_id = None
            if m.annotations and DUPLICATE_ID_ANNOTATION in m.annotations:
                ann = dict(m.annotations)
                duplicate_id = str(ann.pop(DUPLICATE_ID_ANNOTATION))
                m.annotations = ann or None
            job = Job(m, None, m.scheduled_delay, m.scheduled_period, m.scheduled_repeat, sm.seq,
                      cron, duplicate_id)
            self._last_seq = max(self._last_seq, sm.seq)
            self._arm(job)
        if stored:
            log.info("scheduler: %d stored scheduled message(s) recovered", len(stored))
        return len(stored)

    @staticmethod
    def wants(message: Message) -> bool:
        """Whether `message` asks to be scheduled."""
        return asks_scheduling(message)

    def schedule(self, message: Message, connection: ClientConnection,
                 duplicate_id: str | None = None) -> asyncio.Future[None] | None:
        """Take a message with scheduling fields. Returns a future that completes when
        a persistent one is stored (acknowledge the producer then), else None.
        An unusable cron entry raises `MessageFormatError` (that send fails).
        `duplicate_id`: the send's duplicate-detection id given apart from the
        message; a job delivered once is checked with it when its copy is routed,
        a repeating or cron job once, here."""
        if self._broker is None:
            self._broker = connection.broker
        delay = max(message.scheduled_delay, 0)
        entry = message.peek_property(CRON, _CRON_MARKER)
        ops: list[StoreOp] = []
        cron = Cron(str(entry)) if entry is not None else None
        at = _first_due(message)
        period = max(message.scheduled_period, 0) if cron is None else 0
        if duplicate_id is not None and (cron is not None or period > 0):
            # a cron or repeating job's copies are new messages each time: its
            # duplicate id names the job, checked once here (a replayed mirror event
            # is dropped), not with each copy
            if self._seen(message, duplicate_id, ops, connection):
                return None
            duplicate_id = None
        if cron is not None:
            due = min(cron.next_after(now_millis()) + delay, _LATEST_DUE)
            job = Job(message, connection, due, delay, -1, None, cron, duplicate_id)
        else:
            repeat = max(message.scheduled_repeat, 0) if period > 0 else 0
            due = at if at is not None else min(now_millis() + delay, _LATEST_DUE)
            job = Job(message, connection, due, period, repeat, None, None, duplicate_id)
        # a job is announced on the change feed when it is taken: a `MessageAdded`
        # without placements whose message is the stored job (the absolute due
        # time in `scheduled_delay`, the period and the deliveries to come; a cron
        # job's `scheduled_repeat` -1, its entry in its properties): a mirror sends
        # it on then, as Artemis mirrors a scheduled message when it is sent
        stored = job.stored_form()
        feed = self._writer().feed
        event = added(stored, message.destination, (), message.origin) \
            if feed.active and message.destination is not None else None
        if not (message.durable and self.persistent):
            self._arm(job)
            if event is not None:
                self._writer().note(event)
            return None
        job.seq = self._next_seq()
        ops.append(AddMessage(SCHEDULER_KEY, job.seq, stored))
        write = self._writer().write(ops, () if event is None else (event,))
        fut = asyncio.ensure_future(write)
        fut.add_done_callback(lambda f: self._arm(job) if not f.cancelled()
                              and f.exception() is None else None)
        return fut

    def _seen(self, message: Message, duplicate_id: str, ops: list[StoreOp],
              connection: Any) -> bool:
        """Whether `duplicate_id` was seen on the message's destination (counted as a
        repeat there and on `connection`, as the router counts one); otherwise it is
        recorded now, its store ops (a persistent message) added to `ops`, written
        with the job."""
        router = getattr(self._broker, "router", None)
        dest = message.destination
        if router is None or dest is None:
            return False
        stored_ops: list[StoreOp] = []
        if router.seen(dest, duplicate_id, message.durable, stored_ops, [], connection):
            return True
        if message.durable and self.persistent:
            ops.extend(stored_ops)
        return False

    def _writer(self):  # type: ignore[no-untyped-def]
        """The broker's store-write path (broker/writer.py)."""
        assert self._broker is not None
        return self._broker.region.writer

    def _next_seq(self) -> int:
        self._last_seq += 1
        return self._last_seq

    def _arm(self, job: Job) -> None:
        loop = asyncio.get_running_loop()
        self.pending += 1
        self._jobs.add(job)
        delay = max(job.due - now_millis(), 0) / 1000.0
        job.handle = loop.call_later(delay, self._fire, job)

    def _fire(self, job: Job) -> None:
        self._jobs.discard(job)
        self.pending -= 1
        task = asyncio.get_running_loop().create_task(self._deliver(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, job: Job) -> None:
        broker = self._broker
        assert broker is not None
        conn = job.conn
        if conn is None or conn.closed:
            conn = broker.internal_connection()
        message = job.message
        once = job.cron is None and job.remaining <= 0 and not job.period
        copy = message.copy(message_id=message.message_id if once else firing_id(message, job.due),
                            timestamp=now_millis())
        if not once and copy.annotations:
            # a repeat is a message of its own: what the job's message carries about
            # itself (a mirrored message's internal id) does not name the copy
            copy.annotations = client_annotations(copy.annotations) or None
        if not once:
            # a firing of a repeating or cron job: every broker that holds the job
            # (a mirror target) fires its own copy, with this id
            copy.annotations = {**(copy.annotations or {}), SCHEDULED_FIRING: True}
        copy.scheduled_delay = copy.scheduled_period = copy.scheduled_repeat = 0
        props = copy.properties
        if props and not props.keys().isdisjoint(SCHEDULING_PROPERTIES):
            copy.properties = {k: v for k, v in props.items() if k not in SCHEDULING_PROPERTIES}
        if copy.message_id is None:
            copy.message_id = conn.new_message_id()
        try:
            nxt = job.following()
        except Exception:  # noqa: BLE001 - a cron entry that stops matching ends its job
            log.exception("scheduled message %s has no next time", copy.message_id)
            nxt = None
        batch = SendBatch()
        try:
            routed = broker.send_chain.call(SendContext(conn, batch, False, conn.network, None,
                                                        None, job.duplicate_id), copy)
            if routed is not DONE:
                await routed
        except Exception:  # noqa: BLE001 - a refused firing is logged; the job goes on
            batch.abandon()
            log.exception("sending scheduled message %s to %s failed", copy.message_id,
                          copy.destination)
        if job.seq is not None:
            batch.ops.append(RemoveMessage(SCHEDULER_KEY, job.seq))
            if nxt is not None:
                nxt.seq = self._next_seq()
                batch.ops.append(AddMessage(SCHEDULER_KEY, nxt.seq, nxt.stored_form()))
        try:
            await broker.region.writer.commit(batch)
        except Exception:  # noqa: BLE001 - the job stays stored and runs after a restart
            batch.abandon()
            log.exception("storing the firing of scheduled message %s failed", copy.message_id)
            return
        if nxt is not None:
            self._arm(nxt)

    async def cancel(self, match: Callable[[Message], bool]) -> int:
        """Drop the jobs not fired yet whose message `match` accepts (a stored job
        leaves the store): they are never delivered. Returns how many. A mirror
        target uses it for a scheduled message its source acknowledged."""
        found = [job for job in self._jobs if match(job.message)]
        removals = []
        for job in found:
            if job.handle is not None:
                job.handle.cancel()
            self._jobs.discard(job)
            self.pending -= 1
            if job.seq is not None:
                removals.append(RemoveMessage(SCHEDULER_KEY, job.seq))
        if removals:
            await self._writer().write(removals)
        return len(found)

    def stop(self) -> None:
        for job in self._jobs:
            if job.handle is not None:
                job.handle.cancel()
        self._jobs.clear()
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self.pending = 0
