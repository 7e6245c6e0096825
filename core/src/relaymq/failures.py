"""Failures that repeat until an operation succeeds again (a disk that refuses
writes, a database that is down): each reason is news once, so it is logged once
while it repeats, and again after a success."""

from __future__ import annotations

from typing import Final

#: distinct reasons remembered at most (then forgotten, and news again)
KEPT: Final = 64


class RepeatedFailures:
    """The reasons an operation failed since it last succeeded."""

    __slots__ = ("_seen", "count")

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self.count = 0  # failures since the last success

    def failed(self, reason: str | None = None) -> bool:
        """One more failure: True when `reason` is news (not seen since the last
        success); None counts it without a reason to log."""
        self.count += 1
        if reason is None or reason in self._seen:
            return False
        if len(self._seen) >= KEPT:
            self._seen.clear()
        self._seen.add(reason)
        return True

    def succeeded(self) -> int:
        """The operation worked: every reason is news again. How many failed before."""
        count = self.count
        self._seen.clear()
        self.count = 0
        return count
