"""Browsing a destination from its store, in pages, merged with what is only in
memory (non-persistent messages), in sequence order.

A queue keeps a window of messages in memory and the rest in the store, so a
browse that only looked at memory would miss most of a backlog. Pages are
cursor-based: each page ends at a sequence number, and the next page starts
after it (`BrowsePage.next_after`), which stays right while messages come and go.
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator
from typing import Any

from relaymq.management.info import BrowsePage, MessageInfo
from relaymq.model.message import Message, SelectorView, client_annotations
from relaymq.selector import Selector

#: records read from the store at a time when a selector filters them
SCAN_CHUNK = 1000


def message_info(seq: int, message: Message, entry: Any, key: str) -> MessageInfo:
    dest = message.destination
    return MessageInfo(
        seq=seq, message_id=message.message_id, destination=dest.key if dest else key,
        durable=message.durable, priority=message.priority, timestamp=message.timestamp,
        expiration=message.expiration, correlation_id=message.correlation_id,
        type=message.type, group_id=message.group_id, properties=dict(message.properties),
        body=bytes(message.body), delivery_count=entry.delivery_count if entry is not None else 0,
        in_flight=entry is not None and entry.consumer is not None,
        annotations=dict(client_annotations(message.annotations)),
        body_type=message.body_type,
    )


class _Snapshot:
    """The queue's in-memory entries, looked up by sequence number."""

    def __init__(self, queue: Any) -> None:
        entries = list(queue.pending) + queue.held_entries()
        self.by_seq = {e.seq: e for e in entries}
        # only messages the store does not have need merging in
        self.unstored = sorted(e.seq for e in entries if not e.stored)

    def unstored_between(self, low: int, high: float) -> list[int]:
        i = bisect.bisect_right(self.unstored, low)
        j = len(self.unstored) if high == float("inf") else bisect.bisect_right(self.unstored, int(high))
        return self.unstored[i:j]


async def scan(queue: Any, store: Any, after: int = 0, selector: Selector | None = None,
               chunk: int = SCAN_CHUNK) -> AsyncIterator[tuple[int, Message, Any]]:
    """(seq, message, in-memory entry or None) of every message on `queue` after
    `after`, in sequence order, matching `selector`."""
    snap = _Snapshot(queue)
    cursor = after
    while True:
        records = await store.read(queue.key, cursor, chunk) if queue.persists else []
        exhausted = len(records) < chunk
        high: float = float("inf") if exhausted else records[-1].seq
        items: list[tuple[int, Message, Any]] = [
            (r.seq, r.message, snap.by_seq.get(r.seq)) for r in records]
        for seq in snap.unstored_between(cursor, high):
            entry = snap.by_seq[seq]
            if not entry.removed:
                items.append((seq, entry.message, entry))
        items.sort(key=lambda t: t[0])
        for seq, message, entry in items:
            if selector is None or selector.matches(
                    SelectorView(message, entry.delivery_count if entry is not None else 0)):
                yield seq, message, entry
        if exhausted:
            return
        cursor = int(high)


async def browse_page(queue: Any, store: Any, after: int, limit: int,
                      selector: Selector | None) -> BrowsePage:
    out: list[MessageInfo] = []
    last = after
    chunk = limit if selector is None else max(limit, SCAN_CHUNK)
    async for seq, message, entry in scan(queue, store, after, selector, chunk):
        out.append(message_info(seq, message, entry, queue.key))
        last = seq
        if len(out) >= limit:
            return BrowsePage(out, last, False)
    return BrowsePage(out, last, True)
