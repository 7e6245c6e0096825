"""The `lastValue` queue type: Solace's last value queue (a spool of one message).

The queue holds only its newest message: a message arriving while another one
waits replaces it (the older one is forgotten, its stored copy removed). A
message a consumer already holds stays with it and is acknowledged as usual.
Browsing shows the one waiting message without taking it; selectors are refused.
A publisher that subscribes its own last value queue to the topics it publishes
learns, after a crash, the last message the broker accepted.
"""

from __future__ import annotations

from typing import Any

from relaymq.dispatch.entry import QueueEntry

from relaymq_queue_types.solace import SolaceQueue


class LastValueQueue(SolaceQueue):
    """Only the newest waiting message is kept."""

    refuses = "a last value queue holds one message"
    refuses_browsing = False

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.replaced = 0

    def enqueue(self, entry: QueueEntry) -> None:
        for older in list(self.pending):
            if self.remove_pending(older):
                self.replaced += 1
        super().enqueue(entry)
