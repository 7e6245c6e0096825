"""Durable change-feed cursors: a subscriber's events kept in the store.

A durable cursor named NAME is stored like a queue under the key
``feed://NAME`` (declared with `AddDestination`, so every store that keeps
destinations keeps it: memory, kahaDB, JDBC). Each event it wants is written as
one record (`AddMessage` at the cursor's own sequence number) *in the same store
batch* as the work it describes, so the event exists exactly when that work
does, also after a kill -9; acknowledging removes the records (`RemoveMessage`).
The cursor holds a window of events in memory and reads the rest back from the
store (`read(key, after, limit)`), so a subscriber that stops reading for hours
costs disk, not memory, and never slows producers down.

The record of a `MessageAdded` is the event's message itself (a shallow copy
sharing its body and encoded bytes, so the store encodes it once, as it does the
queue's copy) with the event's fields as JSON in the annotation `FEED_FIELD`;
the record of a `MessageRemoved` is a message typed `REMOVED_TYPE` whose body
is its fields as text (or, when a field holds the separators, a JSON list); the record of any other event is an empty message
whose `feed` property holds its fields (as every record did before: every form
is read back). With `share_messages` (a cursor's choice) the record of a
`MessageAdded` is, where it can be, the event's message itself, unchanged: the
object its queue stores in the same batch, so a store that shares one batch's
copies of a message (kahaDB) writes it once; such a record is told apart by
having a destination and no `FEED_FIELD` (the other records have no
destination), and read back it gives the event without its placements. A replayed
`MessageRemoved` (read back from the store) carries a message with only its id,
destination, persistence, origin broker and broker annotations (a mirror keeps
the internal id its origin gave the message there). Events of recovery (`recovered=True`)
are not captured: a cursor records changes, not the broker's restarts.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any, ClassVar, Final, cast

from relaymq.feed.constructors import added, removed
from relaymq.feed.events import (
    ChangeEvent,
    DestinationConfigured,
    DestinationCreated,
    DestinationDeleted,
    MessageAdded,
    MessageRemoved,
    SubscriptionCreated,
    SubscriptionDeleted,
)
from relaymq.model.codec import decode_message, from_json_map, json_encoder, json_map
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import (
    AddDestination,
    AddMessage,
    RemoveDestination,
    RemoveMessage,
    removal_ops,
)

#: store keys of durable cursors start with this
CURSOR_PREFIX: Final = "feed://"
#: events a durable cursor keeps in memory before it reads the rest from the store
WINDOW = 10_000
PAGE = 1_000
#: while events wait only in the store, the next page is read once the buffer is this short
PREFETCH_AT = PAGE // 2
#: the annotation that makes a stored message a `MessageAdded` record (its fields as JSON)
FEED_FIELD: Final = "x-relaymq-feed"
#: the `type` of a `MessageRemoved` record: its fields are the body, a JSON list
REMOVED_TYPE: Final = "x-relaymq-feed-removed"
#: a `MessageRemoved` record's body in its compact form starts with this, and
#: separates its fields with `_SEP` (the earlier form, a JSON list, starts with "[")
_COMPACT: Final = "\x1e"
_COMPACT_BYTE: Final = _COMPACT.encode()
_SEP: Final = "\x1f"
#: with `cancel_pairs`, at most this many unread sends are tracked (older ones stay)
PAIRS_KEPT: Final = 100_000
_to_json: Final = json_encoder(True)


def check_name(name: str) -> None:
    if not name or not name.isprintable() or "/" in name:
        raise ValueError(f"a durable change-feed cursor name must be printable text "
                         f"without '/': {name!r}")


class DurableSubscription:
    """A durable cursor (`ChangeFeed.subscribe_durable`). Read with `get()` (or
    `async for`), then `ack()` what was handled; unacknowledged events are read
    again after a restart (at-least-once)."""

    durable: ClassVar[bool] = True

    def __init__(self, name: str, kinds: frozenset[type[Any]] | None) -> None:
        self.name = name
        self.key = CURSOR_PREFIX + name
        self.kinds = kinds
        self.opened = False
        self.attached = False  # a subscriber asked for it in this broker's life
        self.last_seq = 0  # last sequence number given to an event
        self.recovered_upto = 0  # set by `open`
        self.position = 0  # sequence number of the last event `get` returned
        self._store: Any = None
        self._writer: Any = None
        self._buffer: deque[tuple[int, ChangeEvent]] = deque()
        self._buffered_max = 0
        self._committed = 0  # highest sequence number known to be stored
        self._spilled = False  # events after the buffer are only in the store
        self._delivered: deque[int] = deque()
        self._removing = 0  # acknowledged events whose removal is being written
        self._waiter: asyncio.Future[None] | None = None
        self._prefetch: asyncio.Task[Any] | None = None  # the next page, being read
        #: drop a send and its removal together while the send is unread (`capture`)
        self.cancel_pairs = False
        self.cancelled = 0  # pairs dropped so far (monitoring)
        #: (queue key, queue seq) -> cursor seq of an unread, cancellable send
        self._adds: dict[tuple[str, int], int] = {}
        #: the same, cursor seq -> (queue key, queue seq): a send read back from the
        #: store is known by its sequence number (a shared record has no placements)
        self._add_seqs: dict[int, tuple[str, int]] = {}
        #: a send's record is the sent message itself when that says everything a
        #: reader needs (`shared_record`): no second copy to encode and store
        self.share_messages = False
        #: cursor seqs of sends dropped after they were captured: skipped when read
        self._cancelled: set[int] = set()
        #: hand each captured event to the reader at once, while the store write
        #: that holds it is under way (`stored_upto` says how far the store has
        #: them): a reader that forwards events need not wait for the local sync,
        #: but must not acknowledge (forget) an event beyond `stored_upto`
        self.read_early = False
        #: with `read_early`: called with `stored_upto` after each stored batch
        self.on_stored: Any = None

    def wants_kind(self, cls: type[Any]) -> bool:
        return self.kinds is None or cls in self.kinds

    def wants(self, event: object) -> bool:
        kinds = self.kinds
        if kinds is not None and event.__class__ not in kinds:
            return False
        return not getattr(event, "recovered", False)

    # -- broker side ---------------------------------------------------------------
    async def open(self, store: Any, writer: Any, *, create: bool) -> None:
        if self.opened:
            return
        self._store = store
        self._writer = writer
        stats = await store.stats(self.key)
        self.last_seq = self._committed = stats.last_seq
        #: events up to here were captured before this process (what they describe
        #: in memory only, a non-persistent message, is gone now)
        self.recovered_upto = stats.last_seq
        self._spilled = stats.count > 0
        # what was acknowledged before (its records removed) is not pending: the
        # position starts before the first stored event, or at the end when none is
        if stats.count == 0:
            self.position = max(self.position, stats.last_seq)
        else:
            first = await store.read(self.key, 0, 1)
            if first:
                self.position = max(self.position, first[0].seq - 1)
        if create:
            await writer.write([AddDestination(self.key)])
        self.opened = True

    def capture(self, events: list[ChangeEvent], ops: list[Any]) -> list[tuple[int, ChangeEvent]]:
        """Add a store record for each wanted event to `ops` (the commit's batch).

        With `cancel_pairs`, the removal of a message whose send this cursor
        holds unread is not recorded: the send's record is removed instead (in
        the same batch) and never handed out, so a reader sees neither. Only a
        send made here (no origin broker) with one placement is dropped so; a
        reader that forwards changes (a mirror) then never sends a message
        consumed before it got to it, nor its acknowledgement."""
        staged = []
        key = self.key
        adds = self._adds if self.cancel_pairs else None
        share = self.share_messages
        for ev in events:
            if self.wants(ev):
                cls = ev.__class__
                if adds is not None and cls is MessageRemoved:
                    rm = cast(MessageRemoved, ev)
                    dropped = adds.pop((rm.key, rm.seq), 0)
                    if dropped:
                        self._add_seqs.pop(dropped, None)
                        ops.append(RemoveMessage(key, dropped))
                        self._cancelled.add(dropped)
                        self.cancelled += 1
                        continue
                self.last_seq += 1
                seq = self.last_seq
                if share and cls is MessageAdded:
                    record = shared_record(cast(MessageAdded, ev))
                else:
                    record = encode_event(ev)
                ops.append(AddMessage(key, seq, record))
                staged.append((seq, ev))
                if adds is not None and cls is MessageAdded and len(adds) < PAIRS_KEPT:
                    ad = cast(MessageAdded, ev)
                    if len(ad.placements) == 1 and ad.origin is None and ad.message.origin is None:
                        placement = ad.placements[0]
                        adds[placement] = seq
                        self._add_seqs[seq] = placement
        if staged and self.read_early and staged[0][0] == self._buffered_max + 1:
            # the events before these are in the buffer (or read) already: the
            # reader may have these now; otherwise `committed` buffers them in order
            self._buffer_staged(staged)
        return staged

    def _handed_out(self, seq: int) -> None:
        """The event at `seq` is read: if it is a cancellable send, its removal is
        recorded from now on."""
        placement = self._add_seqs.pop(seq, None)
        if placement is not None:
            self._adds.pop(placement, None)

    def committed(self, staged: list[tuple[int, ChangeEvent]]) -> None:
        """The batch holding `staged` is stored: they may be read now (with
        `read_early` they were handed over at `capture` already, unless the
        buffer was full then)."""
        if not staged:
            return
        self._committed = max(self._committed, staged[-1][0])
        self._buffer_staged(staged)
        if self.read_early and self.on_stored is not None:
            self.on_stored(self._committed)

    @property
    def stored_upto(self) -> int:
        """Every event up to this sequence number is in the store."""
        return self._committed

    def _buffer_staged(self, staged: list[tuple[int, ChangeEvent]]) -> None:
        """Put `staged` in the reader's buffer (or leave them to be paged in from
        the store once it is full) and wake the reader."""
        if self._spilled or len(self._buffer) >= WINDOW:
            self._spilled = True
        else:
            top = self._buffered_max
            for item in staged:
                if item[0] > top:
                    self._buffer.append(item)
            self._buffered_max = max(top, staged[-1][0])
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    # -- reading ---------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Events stored and not read yet (an estimate while spilled to the store);
        sends dropped with their removal (`cancel_pairs`) do not count."""
        dropped = len(self._cancelled)
        return max(self._committed - self.position - dropped, len(self._buffer) - dropped, 0)

    @property
    def unacknowledged(self) -> int:
        """Events returned and still in the store (an acknowledgement counts them
        until its removal is written: a kill -9 before then returns them again)."""
        return len(self._delivered) + self._removing

    async def get(self) -> ChangeEvent:
        """The next event, waiting for one."""
        while True:
            buf = self._buffer
            if self._spilled and len(buf) <= PREFETCH_AT:
                self._prefetch_page()
            while buf:
                seq, ev = buf.popleft()
                if seq <= self.position:
                    continue
                self.position = seq
                if self._cancelled and seq in self._cancelled:
                    self._cancelled.discard(seq)
                    continue
                if self._adds:
                    self._handed_out(seq)
                self._delivered.append(seq)
                return ev
            if self._spilled and self.position < self._committed:
                await self._page()
                continue
            self._spilled = False
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter

    def take(self, limit: int) -> list[tuple[int, ChangeEvent]]:
        """Up to `limit` (sequence number, event) pairs that are in memory now,
        without waiting (none when the next must be read from the store or has
        not happened yet: then `get`). A reader of a long run of events takes
        them a batch at a time instead of awaiting `get` for each."""
        buf = self._buffer
        if self._spilled and len(buf) <= PREFETCH_AT:
            self._prefetch_page()
        out: list[tuple[int, ChangeEvent]] = []
        position = self.position
        delivered = self._delivered
        cancelled = self._cancelled
        adds = self._adds
        while buf and len(out) < limit:
            item = buf.popleft()
            seq = item[0]
            if seq <= position:
                continue
            position = seq
            if cancelled and seq in cancelled:
                cancelled.discard(seq)
                continue
            if adds:
                self._handed_out(seq)
            delivered.append(seq)
            out.append(item)
        self.position = position
        return out

    def __aiter__(self) -> DurableSubscription:
        return self

    async def __anext__(self) -> ChangeEvent:
        return await self.get()

    def _prefetch_page(self) -> None:
        """Start reading the page after the buffer from the store, unless under way:
        a reader that drains a long backlog finds the next page read already."""
        if self._prefetch is None and self._buffered_max < self._committed:
            self._prefetch = asyncio.get_running_loop().create_task(
                self._store.read(self.key, self._buffered_max, PAGE))

    async def _page(self) -> None:
        self._prefetch_page()
        task = self._prefetch
        if task is None:
            self._spilled = False
            return
        try:
            records = await task
        finally:
            if self._prefetch is task:
                self._prefetch = None
        committed = self._committed
        first = top = self._buffered_max
        cancelled = self._cancelled
        for rec in records:
            if rec.seq > committed:
                break  # its write is still under way: `committed` buffers it
            if rec.seq > top:
                top = rec.seq
                if cancelled and rec.seq in cancelled:
                    continue  # dropped (`capture`), its removal still under way
                self._buffer.append((rec.seq, decode_event(rec.message)))
        if self.cancel_pairs:
            if cancelled:  # dropped sends of this stretch are gone from the store too
                self._cancelled = {s for s in cancelled if s <= first or s > top}
            if not records:  # what is left up to `committed` was dropped unread
                top = max(top, committed)
            if not self._buffer and top >= committed and self.position < committed:
                self.position = committed  # every event up to it was read or dropped
        self._buffered_max = top
        if top >= committed or not records:
            self._spilled = False

    async def ack(self, position: int | None = None) -> int:
        """Forget (remove from the store) every event returned so far, or those up
        to sequence number `position`; returns how many."""
        upto = self.position if position is None else position
        seqs = []
        delivered = self._delivered
        while delivered and delivered[0] <= upto:
            seqs.append(delivered.popleft())
        if seqs:
            runs = bool(getattr(self._store, "removal_runs", False))
            self._removing += len(seqs)
            try:
                await self._writer.write(removal_ops({self.key: seqs}, runs))
            finally:
                self._removing -= len(seqs)
        return len(seqs)

    async def destroy(self) -> None:
        self.opened = False
        if self._prefetch is not None:
            self._prefetch.cancel()
            self._prefetch = None
        self._buffer.clear()
        self._delivered.clear()
        if self._writer is not None:
            await self._writer.write([RemoveDestination(self.key)])

    def close(self) -> None:
        """Detach; the cursor keeps capturing (drop it with `drop_durable`)."""
        self.attached = False


# -- the stored form of an event ---------------------------------------------------------
def encode_event(ev: ChangeEvent) -> Message:
    cls = ev.__class__
    if cls is MessageAdded:
        return _added_record(ev)  # type: ignore[arg-type]
    if cls is MessageRemoved:
        return _removed_record(ev)  # type: ignore[arg-type]
    fields: dict[str, Any] = {"k": ev.kind, "o": ev.origin}
    if isinstance(ev, MessageRemoved):
        m = ev.message
        fields.update(d=ev.destination.key, key=ev.key, seq=ev.seq, r=ev.reason,
                      id=m.message_id, durable=m.durable)
    elif isinstance(ev, (DestinationCreated, DestinationDeleted)):
        fields["d"] = ev.destination.key
    elif isinstance(ev, (SubscriptionCreated, SubscriptionDeleted)):
        fields.update(key=ev.key, c=ev.client_id, n=ev.name, t=ev.topic.key)
        if isinstance(ev, SubscriptionCreated):
            fields.update(s=ev.selector, nl=ev.no_local)
    elif isinstance(ev, DestinationConfigured):
        fields["d"] = ev.destination.key
        fields["set"] = {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
                         for k, v in ev.settings.items()}
    return Message(b"", durable=True, properties={"feed": json.dumps(fields)})


def _removed_record(ev: MessageRemoved) -> Message:
    """An acknowledgement, the most frequent record after sends: a message typed
    `REMOVED_TYPE` (no properties, so the store encodes no JSON map) whose body is
    its fields as text, `_COMPACT` then the fields separated by `_SEP` (a text
    field holding either falls back to a JSON list, the earlier form). The
    message's broker annotations come last, as a JSON map, when it has any (a
    mirrored message's internal id on its origin)."""
    m = ev.message
    origin = ev.origin
    mid = m.message_id
    morigin = m.origin
    dkey = ev.destination.key
    key = ev.key
    reason = ev.reason
    ann = m.annotations
    if _plain(origin) and _plain(mid) and _plain(morigin) and _plain(dkey) and _plain(key) \
            and _plain(reason):
        flags = (1 if m.durable else 0) | (2 if origin is not None else 0) \
            | (4 if mid is not None else 0) | (8 if morigin is not None else 0)
        parts = [_COMPACT + chr(0x30 + flags), origin or "", dkey, key, str(ev.seq), reason,
                 mid or "", morigin or ""]
        if ann:
            parts.append(_to_json(json_map(ann)))  # control characters are escaped in JSON
        return Message(_SEP.join(parts).encode(), durable=True, type=REMOVED_TYPE)
    fields: list[Any] = [origin, dkey, key, ev.seq, reason, mid, m.durable, morigin]
    if ann:
        fields.append(json_map(ann))
    return Message(_to_json(fields).encode(), durable=True, type=REMOVED_TYPE)


def _plain(text: str | None) -> bool:
    """`text` can be a field of a compact removal record."""
    return text is None or (_SEP not in text and _COMPACT not in text)


def _decode_removed(record: Message) -> ChangeEvent:
    body = record.body
    if body[:1] == _COMPACT_BYTE:
        c = bytes(body[1:]).decode().split(_SEP, 8)
        flags = ord(c[0]) - 0x30
        dkey = c[2]
        dest = Destination.parse(dkey)
        msg = Message(b"", destination=dest, message_id=c[6] if flags & 4 else None,
                      durable=bool(flags & 1), origin=c[7] if flags & 8 else None,
                      annotations=from_json_map(json.loads(c[8])) if len(c) > 8 else None)
        return removed(msg, dest, c[3], int(c[4]), c[5], c[1] if flags & 2 else None)
    f = json.loads(body)
    origin, dkey, key, seq, reason, mid, durable = f[:7]
    dest = Destination.parse(dkey)
    n = len(f)
    msg = Message(b"", destination=dest, message_id=mid, durable=bool(durable),
                  origin=f[7] if n > 7 else None,
                  annotations=from_json_map(f[8]) if n > 8 and f[8] else None)
    return removed(msg, dest, key, seq, reason, origin)


def _added_record(ev: MessageAdded) -> Message:
    """The message itself, durable, its event's fields in the `FEED_FIELD` annotation
    (``durable`` keeps the message's own persistence)."""
    msg = ev.message
    placements = ev.placements
    fields = _to_json({"o": ev.origin, "d": ev.destination.key, "durable": msg.durable,
                       "p": placements[0] if len(placements) == 1 else placements})
    rec = msg.copy()  # shares body and encoded bytes; the annotations are replaced below
    ann = msg.annotations
    rec.annotations = {**ann, FEED_FIELD: fields} if ann else {FEED_FIELD: fields}
    rec.durable = True
    return rec


def shared_record(ev: MessageAdded) -> Message:
    """A send's record for a cursor with `share_messages`: the event's message
    itself, the same object its queue stores in this batch, when it says the rest
    of the event (its destination and origin are the event's, it is persistent,
    it carries no record marker); else `encode_event`'s copy. A store that writes
    a batch's copies of one message once (kahaDB: one write, an index entry
    each) then neither encodes nor writes it a second time. Read back, such a
    record gives an event without placements."""
    msg = ev.message
    dest = msg.destination
    if dest is None or not msg.durable or msg.origin != ev.origin or msg.type == REMOVED_TYPE \
            or not (dest is ev.destination or dest == ev.destination):
        return _added_record(ev)
    ann = msg.annotations
    if ann and FEED_FIELD in ann:
        return _added_record(ev)
    return msg


def _decode_shared(record: Message) -> ChangeEvent:
    msg = record.copy()  # the store may hand out the record it keeps (memory store)
    dest = msg.destination
    assert dest is not None
    return added(msg, dest, (), msg.origin)


def _decode_added(record: Message, fields: str) -> ChangeEvent:
    f = json.loads(fields)
    msg = record.copy()  # the store may hand out the record it keeps (memory store)
    ann = dict(record.annotations or {})
    ann.pop(FEED_FIELD, None)
    msg.annotations = ann or None
    msg.durable = bool(f.get("durable"))
    p = f["p"]
    placements = ((p[0], p[1]),) if p and isinstance(p[0], str) else tuple((k, s) for k, s in p)
    return added(msg, Destination.parse(f["d"]), placements, f.get("o"))


def decode_event(record: Message) -> ChangeEvent:
    ann = record.annotations
    if ann:  # first: a sent message's own `type` may be anything
        fields = ann.get(FEED_FIELD)
        if isinstance(fields, str):
            return _decode_added(record, fields)
    if record.type == REMOVED_TYPE:
        return _decode_removed(record)
    if record.destination is not None:  # `shared_record`: the others have none
        return _decode_shared(record)
    f = json.loads(record.properties["feed"])
    kind = f["k"]
    origin = f.get("o")
    if kind == MessageAdded.kind:  # written before records were the message itself
        return added(decode_message(record.body), Destination.parse(f["d"]),
                     tuple((k, s) for k, s in f["p"]), origin)
    if kind == MessageRemoved.kind:
        dest = Destination.parse(f["d"])
        msg = Message(b"", destination=dest, message_id=f.get("id"), durable=bool(f.get("durable")))
        return removed(msg, dest, f["key"], f["seq"], f["r"], origin)
    if kind == DestinationCreated.kind:
        return DestinationCreated(Destination.parse(f["d"]), False, origin)
    if kind == DestinationDeleted.kind:
        return DestinationDeleted(Destination.parse(f["d"]), origin)
    if kind == SubscriptionCreated.kind:
        return SubscriptionCreated(f["key"], f["c"], f["n"], Destination.parse(f["t"]),
                                   f.get("s"), bool(f.get("nl")), False, origin)
    if kind == SubscriptionDeleted.kind:
        return SubscriptionDeleted(f["key"], f["c"], f["n"], Destination.parse(f["t"]), origin)
    if kind == DestinationConfigured.kind:
        return DestinationConfigured(Destination.parse(f["d"]), f.get("set") or {}, origin)
    raise ValueError(f"unknown change-feed record kind {kind!r}")
