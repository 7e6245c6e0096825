"""What a broker's mirror targets and sources share.

* `Applied`: work a mirror target applied on behalf of a peer that the change
  feed reports without that peer as its origin (removals by id, destinations
  made through management). Sources look here so they never send a peer's own
  work back to it (dual mirror, rings).
* `TargetIndex`: where a mirrored message is, by (queue key, internal id), so a
  ``postAck`` finds it without scanning the queue. Kept current from the change
  feed; after a restart a queue is read once from the store when first needed.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Final

from relaymq.feed import MessageAdded, MessageRemoved

from relaymq_mirror.wire import id_of

log = logging.getLogger("relaymq.mirror")

_APPLIED: Final = "mirror-applied"
_INDEX: Final = "mirror-target-index"
LIMIT: Final = 200_000


class Applied:
    def __init__(self) -> None:
        self._acks: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._things: OrderedDict[str, str] = OrderedDict()

    def ack(self, key: str, seq: int, origin: str) -> None:
        acks = self._acks
        acks[(key, seq)] = origin
        if len(acks) > LIMIT:
            acks.popitem(last=False)

    def ack_origin(self, key: str, seq: int) -> str | None:
        return self._acks.get((key, seq))

    def thing(self, key: str, origin: str) -> None:
        """A destination or subscription (by key) made or removed for `origin`."""
        things = self._things
        things[key] = origin
        things.move_to_end(key)
        if len(things) > LIMIT:
            things.popitem(last=False)

    def thing_origin(self, key: str) -> str | None:
        return self._things.get(key)


def applied(broker: Any) -> Applied:
    found = broker.extensions.get(_APPLIED)
    if not isinstance(found, Applied):
        found = Applied()
        broker.extensions[_APPLIED] = found
    return found


class TargetIndex:
    """(queue key, internal id) -> sequence number, for the queues of one broker.

    It takes the change feed's events in only while someone will look here: a
    mirror link is attached or postAcks wait for their message. When neither is
    so (`release`), it leaves the feed and forgets what it indexed, so a broker
    that stopped being a target (a standby promoted after its source died) does
    not keep each stored message's event; the next look subscribes again and
    reads each queue once from the store, as after a restart."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.sub: Any = None
        self.ids: dict[str, dict[int, int]] = {}
        self.scanned: set[str] = set()
        self.open()

    def open(self) -> None:
        """Take the feed's events in from now on (a no-op while it does)."""
        if self.sub is None:
            self.sub = self.broker.change_feed.subscribe({MessageAdded, MessageRemoved},
                                                         name="mirror target")

    def release(self) -> None:
        """Nobody looks here until a mirror link attaches or a postAck waits: leave
        the feed and forget the index (rebuilt from the store when needed)."""
        sub, self.sub = self.sub, None
        if sub is not None:
            sub.close()
        self.ids = {}
        self.scanned = set()

    def absorb(self) -> None:
        """Take in what the feed reported since the last look."""
        sub = self.sub
        if sub is None:
            return
        ids = self.ids
        for ev in sub.drain():
            if type(ev) is MessageAdded:
                if not ev.placements:
                    continue
                mid = id_of(ev.message)
                for key, seq in ev.placements:
                    per = ids.get(key)
                    if per is None:
                        per = ids[key] = {}
                    per[mid] = seq
            else:
                per = ids.get(ev.key)
                if per is not None:
                    mid = id_of(ev.message)
                    if per.get(mid) == ev.seq:
                        del per[mid]

    async def find(self, queue: Any, ident: int) -> int | None:
        self.open()
        self.absorb()
        key = queue.key
        per = self.ids.get(key)
        if per is not None and ident in per:
            return per[ident]
        if key not in self.scanned:
            await self._scan(queue)
            per = self.ids.get(key)
            if per is not None and ident in per:
                return per[ident]
        return None

    async def _scan(self, queue: Any) -> None:
        """Read what the queue holds (memory and store) into the index, once. The
        feed reports what is stored after the index subscribed; a send handed to
        the store writer before that is waited for, so the read sees it."""
        self.scanned.add(queue.key)
        await self.broker.region.writer.settled()
        per = self.ids.setdefault(queue.key, {})
        for entry in queue.memory_entries():
            per.setdefault(id_of(entry.message), entry.seq)
        if not self.broker.management.persistent:
            return
        after = 0
        while True:
            records = await self.broker.read_messages(queue.key, after=after, limit=1000)
            for rec in records:
                per.setdefault(id_of(rec.message), rec.seq)
            if len(records) < 1000:
                break
            after = records[-1].seq
        self.absorb()

    def forget(self, key: str, ident: int) -> None:
        per = self.ids.get(key)
        if per is not None:
            per.pop(ident, None)

    def remember(self, key: str, ident: int, seq: int) -> None:
        """Index `ident` at `seq` again (its postAck found it held by a consumer:
        the message stays until it is released)."""
        self.ids.setdefault(key, {})[ident] = seq


def target_index(broker: Any) -> TargetIndex:
    """The broker's index, taking the feed's events in (again, if it was released)."""
    found = broker.extensions.get(_INDEX)
    if not isinstance(found, TargetIndex):
        found = TargetIndex(broker)
        broker.extensions[_INDEX] = found
    else:
        found.open()
    return found


def target_index_if_any(broker: Any) -> TargetIndex | None:
    """The broker's index as it is (None if no mirror link ever needed one)."""
    found = broker.extensions.get(_INDEX)
    return found if isinstance(found, TargetIndex) else None
