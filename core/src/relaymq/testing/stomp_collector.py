"""A stomp.py listener that collects frames, with bounded waits that raise.

    conn.set_listener("collector", col := Collector())
    col.wait_messages(3)          # AssertionError naming what came, on timeout

stomp.py finds a listener's `on_<frame>` methods by name, so this needs no
import of stomp.py (core does not depend on it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Collector:
    """Collects MESSAGE, ERROR and RECEIPT frames and heart-beats; waits for them."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.messages: list[Any] = []
        self.errors: list[Any] = []
        self.receipts: list[str] = []
        self.heartbeats = 0  # heart-beats received from the broker
        self.disconnected = False

    def on_message(self, frame: Any) -> None:
        with self.cond:
            self.messages.append(frame)
            self.cond.notify_all()

    def on_error(self, frame: Any) -> None:
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.receipts.append(frame.headers["receipt-id"])
            self.cond.notify_all()

    def on_heartbeat(self) -> None:
        with self.cond:
            self.heartbeats += 1
            self.cond.notify_all()

    def on_disconnected(self) -> None:
        with self.cond:
            self.disconnected = True
            self.cond.notify_all()

    def wait(self, pred: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait for `pred`; its value at the end (assert it)."""
        with self.cond:
            return self.cond.wait_for(pred, timeout)

    def wait_messages(self, n: int, timeout: float = 10.0) -> list[Any]:
        """All messages so far, once there are at least `n`; AssertionError on timeout."""
        if not self.wait(lambda: len(self.messages) >= n, timeout):
            raise AssertionError(f"{len(self.messages)} of {n} messages after {timeout:g} s: "
                                 f"{[m.body for m in self.messages][:20]!r}; errors: "
                                 f"{[e.headers.get('message') for e in self.errors]!r}")
        with self.cond:
            return list(self.messages)

    def wait_receipt(self, rid: str, timeout: float = 5.0) -> bool:
        return self.wait(lambda: rid in self.receipts, timeout)

    def wait_error(self, timeout: float = 5.0) -> Any:
        """The last ERROR frame, once there is one; None on timeout (assert it)."""
        self.wait(lambda: bool(self.errors), timeout)
        return self.errors[-1] if self.errors else None

    def bodies(self) -> list[str]:
        return [m.body for m in self.messages]
