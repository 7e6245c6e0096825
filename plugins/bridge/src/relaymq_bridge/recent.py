"""The ids of the last messages an AT_MOST_ONCE bridge sent.

AT_MOST_ONCE acknowledges a batch on the source before sending it, without waiting
for the source to store the acknowledgements. A source killed in between delivers
those messages again after its restart; the bridge recognises them by their stable
id (`bridge.stable_id`) and acknowledges them without sending them a second time.
The window is bounded: it covers what a source can have in doubt (a few batches),
not a restart of the bridge itself (which does not duplicate under AT_MOST_ONCE:
the acknowledgements reached the running source before anything was sent)."""

from __future__ import annotations

from collections import deque


class RecentIds:
    def __init__(self, size: int) -> None:
        self.size = size
        self._ids: set[str] = set()
        self._order: deque[str] = deque()

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, message_id: str) -> None:
        if message_id in self._ids:
            return
        self._ids.add(message_id)
        self._order.append(message_id)
        if len(self._order) > self.size:
            self._ids.discard(self._order.popleft())
