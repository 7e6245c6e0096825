"""``sync="true"``: a client's send, commit or acknowledgement completes only
once the target accepted the mirror events it caused (Artemis holds the
client's blocking operation the same way). While the target is unreachable
such operations wait; clients of a ``sync`` mirror need the target up.

The broker's store writer is wrapped: the future a client's store write
returns completes when the write is stored *and* the mirror's accepted
position has reached the cursor's last event at that moment. Only client
work waits (send batches, acknowledgements); the writes of the cursor itself
and of management do not.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Any

_counter = itertools.count()


class SyncWaiters:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._source: Any = None
        self._originals: dict[str, Any] = {}
        self._writer: Any = None

    def install(self, broker: Any, source: Any) -> None:
        writer = broker.region.writer
        if self._writer is not None:
            return
        self._writer = writer
        self._source = source
        commit_soon = writer.commit_soon
        remove = writer.remove
        self._originals = {"commit_soon": commit_soon, "remove": remove}

        def wrapped_commit(batch: Any) -> Any:
            fut = commit_soon(batch)
            if type(batch).__name__ != "SendBatch":
                return fut
            return self._after(fut)

        def wrapped_remove(queue: Any, entry: Any, reason: str) -> Any:
            fut = remove(queue, entry, reason)
            return self._after(fut) if fut is not None else None

        writer.commit_soon = wrapped_commit
        writer.remove = wrapped_remove

    def uninstall(self, broker: Any) -> None:
        writer = self._writer
        if writer is None:
            return
        for name in self._originals:
            try:
                delattr(writer, name)
            except AttributeError:
                pass
        self._writer = None
        for _, _, fut in self._heap:
            if not fut.done():
                fut.set_result(None)
        self._heap.clear()

    def _after(self, stored: Any) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        out: asyncio.Future[None] = loop.create_future()
        source = self._source

        def done(f: asyncio.Future[Any]) -> None:
            if f.cancelled():
                out.cancel()
                return
            exc = f.exception()
            if exc is not None:
                out.set_exception(exc)
                return
            cursor = source.cursor
            target = cursor.last_seq if cursor is not None else 0
            if source._acked >= target:
                out.set_result(None)
            else:
                heapq.heappush(self._heap, (target, next(_counter), out))

        asyncio.ensure_future(stored).add_done_callback(done)
        return out

    def reached(self, position: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= position:
            _, _, fut = heapq.heappop(heap)
            if not fut.done():
                fut.set_result(None)
