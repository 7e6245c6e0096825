"""``sync="true"``: a client's send, commit or acknowledgement completes only
once the target accepted the mirror events it caused (Artemis holds the
client's blocking operation the same way). While the target is unreachable
such operations wait; clients of a ``sync`` mirror need the target up.

The mirror sets the store writer's `hold` (the kernel's hook for this): the
future a client's store write returns completes when the write is stored
*and* the mirror's accepted position has reached the cursor's last event at
that moment. Only client work waits (send batches, acknowledgements); the
writes of the cursor itself and of management do not.
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
        self._previous: Any = None
        self._writer: Any = None

    def install(self, broker: Any, source: Any) -> None:
        writer = broker.region.writer
        if self._writer is not None:
            return
        self._writer = writer
        self._source = source
        previous = writer.hold
        self._previous = previous

        def hold(batch: Any, fut: Any) -> Any:
            if previous is not None:
                fut = previous(batch, fut)
            if batch is not None and type(batch).__name__ != "SendBatch":
                return fut  # the cursor's own writes, management: never held
            return self._after(fut)

        writer.hold = hold

    def uninstall(self, broker: Any) -> None:
        writer = self._writer
        if writer is None:
            return
        writer.hold = self._previous
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
