"""The change feed: one ordered, post-commit stream of what the broker did.

```python
sub = broker.change_feed.subscribe()                 # every event, in memory
sub = broker.change_feed.subscribe({MessageAdded})   # only some kinds
async for event in sub: ...                          # or await sub.get(), sub.drain()
cursor = await broker.change_feed.subscribe_durable("mirror-b")  # kept in the store
event = await cursor.get(); ...; await cursor.ack()  # acknowledged events are forgotten
```

The broker's one store-write path (`broker/writer.py`) hands the feed the events
of each group commit once the store has written it (`publish`); events of
transient work are published when it becomes visible. Publishing never waits:
an in-memory subscriber has an unbounded queue (a subscriber that stops reading
costs memory, never a producer's time, and loses nothing), and a durable cursor
(`cursor.py`) keeps its events in the store, written in the same store batch as
the work they describe.

Nobody subscribed costs nothing: the kernel tests the feed's plain flags
(`watch_added`, `watch_removed`, `active`) before building any event.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from relaymq.feed.events import EVENT_TYPES, ChangeEvent, MessageAdded, MessageRemoved

if TYPE_CHECKING:
    from relaymq.feed.cursor import DurableSubscription

log = logging.getLogger("relaymq.feed")

#: an in-memory subscriber holding more unread events than this gets one warning
BACKLOG_WARNING: Final = 100_000


class FeedSubscription:
    """An in-process subscriber: the events it has not read yet, in order."""

    durable = False

    def __init__(self, feed: ChangeFeed, kinds: frozenset[type[Any]] | None,
                 name: str | None = None) -> None:
        self.feed = feed
        self.kinds = kinds
        self.name = name
        self.closed = False
        self._events: deque[ChangeEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._warned = False

    def wants(self, event: object) -> bool:
        kinds = self.kinds
        return kinds is None or event.__class__ in kinds

    def wants_kind(self, cls: type[Any]) -> bool:
        return self.kinds is None or cls in self.kinds

    # -- called by the feed -----------------------------------------------------
    def _push(self, event: ChangeEvent) -> None:
        events = self._events
        events.append(event)
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)
        elif not self._warned and len(events) > BACKLOG_WARNING:
            self._warned = True
            log.warning("change-feed subscriber %s has %d unread events; it keeps them all "
                        "(use a durable cursor to keep a backlog in the store)",
                        self.name or hex(id(self)), len(self._events))

    # -- reading ---------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Events received and not read yet."""
        return len(self._events)

    def get_nowait(self) -> ChangeEvent | None:
        """The next event, or None when there is none now."""
        events = self._events
        return events.popleft() if events else None

    def drain(self, limit: int | None = None) -> list[ChangeEvent]:
        """Up to `limit` (default: all) events that are waiting now."""
        events = self._events
        if limit is None or limit >= len(events):
            out = list(events)
            events.clear()
            return out
        return [events.popleft() for _ in range(limit)]

    async def wait(self) -> None:
        """Return once at least one event is waiting (at once if one is)."""
        while not self._events:
            if self.closed:
                raise StopAsyncIteration
            if self._waiter is None or self._waiter.done():
                self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter

    async def get(self) -> ChangeEvent:
        """The next event, waiting for one. Raises `StopAsyncIteration` once closed."""
        if not self._events:
            await self.wait()
        return self._events.popleft()

    def __aiter__(self) -> AsyncIterator[ChangeEvent]:
        return self

    async def __anext__(self) -> ChangeEvent:
        return await self.get()

    def close(self) -> None:
        """Stop receiving events (unread ones are dropped)."""
        if self.closed:
            return
        self.closed = True
        self.feed._remove(self)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)


def _kinds(kinds: Iterable[type[Any]] | None) -> frozenset[type[Any]] | None:
    if kinds is None:
        return None
    out = frozenset(kinds)
    unknown = [k for k in out if k not in EVENT_TYPES]
    if unknown:
        names = ", ".join(t.__name__ for t in EVENT_TYPES)
        raise ValueError(f"not change-feed event types: {unknown!r}; the types are {names}")
    return out


class ChangeFeed:
    """The broker's change feed (`broker.change_feed`)."""

    def __init__(self) -> None:
        self._subs: list[FeedSubscription] = []
        self._cursors: dict[str, DurableSubscription] = {}
        self._store: Any = None  # PersistenceAdapter, set by attach()
        self._writer: Any = None  # StoreWriter, set by attach()
        #: someone listens to anything
        self.active = False
        #: someone listens to `MessageAdded` / `MessageRemoved` (the per-message kinds)
        self.watch_added = False
        self.watch_removed = False
        #: a durable cursor wants `MessageAdded`: transient sends go through the writer
        self.capture_added = False
        #: durable cursors that capture into the store with each commit
        self.capturing: list[DurableSubscription] = []
        #: event class -> the in-memory subscribers that take it (publishing looks once)
        self._by_kind: dict[type[Any], list[FeedSubscription]] = {}

    # -- subscribing ------------------------------------------------------------------
    def subscribe(self, kinds: Iterable[type[Any]] | None = None, *,
                  name: str | None = None) -> FeedSubscription:
        """An in-memory subscriber to the events of `kinds` (classes from
        `relaymq.feed.events`; None: all) committed from now on."""
        sub = FeedSubscription(self, _kinds(kinds), name)
        self._subs.append(sub)
        self._recompute()
        return sub

    async def subscribe_durable(self, name: str,
                                kinds: Iterable[type[Any]] | None = None) -> DurableSubscription:
        """The durable cursor `name`: its events are written to the store with the
        work they describe and stay there until acknowledged (`ack`), also across a
        crash. Made on first use; later calls (also after a restart) return the
        same cursor, which captured everything committed meanwhile. Call before
        the broker starts to have it open before any client connects."""
        from relaymq.feed.cursor import DurableSubscription, check_name

        check_name(name)
        cur = self._cursors.get(name)
        if cur is None:
            cur = DurableSubscription(name, _kinds(kinds))
            if self._store is not None:
                await cur.open(self._store, self._writer, create=True)
            self._cursors[name] = cur
        elif kinds is not None:
            cur.kinds = _kinds(kinds)
        cur.attached = True
        self._recompute()
        return cur

    async def drop_durable(self, name: str) -> bool:
        """Delete the durable cursor `name` and every event it holds."""
        cur = self._cursors.pop(name, None)
        if cur is None:
            return False
        await cur.destroy()
        self._recompute()
        return True

    @property
    def durable_cursors(self) -> list[str]:
        return sorted(self._cursors)

    def _remove(self, sub: FeedSubscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)
        self._recompute()

    def _recompute(self) -> None:
        self._by_kind = {cls: [s for s in self._subs if s.wants_kind(cls)] for cls in EVENT_TYPES}
        subs: list[Any] = list(self._subs)
        capturing = [c for c in self._cursors.values() if c.opened]
        self.capturing = capturing
        subs += capturing
        self.active = bool(subs)
        self.watch_added = any(s.wants_kind(MessageAdded) for s in subs)
        self.watch_removed = any(s.wants_kind(MessageRemoved) for s in subs)
        self.capture_added = any(c.wants_kind(MessageAdded) for c in capturing)

    # -- the broker's side -----------------------------------------------------------
    async def attach(self, store: Any, writer: Any) -> None:
        """Bind to the started store: reopen the durable cursors it holds (they
        capture from now on, whether or not their subscriber is back yet)."""
        from relaymq.feed.cursor import CURSOR_PREFIX, DurableSubscription

        self._store = store
        self._writer = writer
        for key in await store.destinations():
            if key.startswith(CURSOR_PREFIX):
                name = key[len(CURSOR_PREFIX):]
                if name not in self._cursors:
                    self._cursors[name] = DurableSubscription(name, None)
        for cur in self._cursors.values():
            await cur.open(store, writer, create=True)
        self._recompute()

    def publish(self, events: Sequence[ChangeEvent]) -> None:
        """Hand committed events to the in-memory subscribers, in order."""
        by_kind = self._by_kind
        for ev in events:
            subs = by_kind.get(ev.__class__)
            if subs:
                for s in subs:
                    s._push(ev)

    def publish_one(self, event: ChangeEvent) -> None:
        subs = self._by_kind.get(event.__class__)
        if subs:
            for s in subs:
                s._push(event)
