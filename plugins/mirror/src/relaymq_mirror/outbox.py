"""What a mirror source's link sends: one transfer per event, or, to a target
that reads them (`relaymq_mirror.batch.PROPERTY`), the events of a run together."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from relaymq_amqp.outgoing.common import Outcome

from relaymq_mirror import batch

#: the verdict of an event of a rejected batch that the target did not refuse
ACCEPTED: Final = Outcome("accepted")


class Outbox:
    """Events of one link on their way: `add` each (its cursor position and its
    encoded message), `flush` at the end of a run.

    `transmit(data, settled)` sends one transfer and calls `settled` with its
    outcome (or the exception that lost it); `settle(position, outcome)` is the
    mirror's verdict on one event, `settle_run(positions)` on the events of a
    batch the target accepted whole; `after(outcome)` runs once per transfer."""

    __slots__ = ("transmit", "settle", "settle_run", "after", "batching", "limit", "_events", "_size", "sent",
                 "transfers")

    def __init__(self, transmit: Callable[[bytes, Callable[[Any], None]], None],
                 settle: Callable[[int, Any], None], settle_run: Callable[[list[int]], None],
                 after: Callable[[Any], None], batching: bool, limit: int) -> None:
        self.transmit = transmit
        self.settle = settle
        self.settle_run = settle_run
        self.after = after
        self.batching = batching and limit > 0
        self.limit = limit
        self._events: list[tuple[int, bytes]] = []
        self._size = 0
        self.sent = 0  # events handed to the link
        self.transfers = 0  # and the transfers that carried them

    def add(self, position: int, data: bytes) -> None:
        if not self.batching:
            self._one(position, data)
            return
        size = len(data) + 4
        if self._size + size > self.limit and self._events:
            self.flush()
        self._events.append((position, data))
        self._size += size
        if len(self._events) >= batch.MAX_EVENTS:
            self.flush()

    def flush(self) -> None:
        events = self._events
        if not events:
            return
        self._events = []
        self._size = 0
        if len(events) == 1:
            self._one(events[0][0], events[0][1])
            return
        self.sent += len(events)
        settle = self.settle
        settle_run = self.settle_run
        after = self.after

        def settled(result: Any) -> None:
            refused: set[int] | None = None
            if not isinstance(result, BaseException):
                state = result.state
                if state == "accepted":
                    settle_run([position for position, _ in events])
                    after(result)
                    return
                if state == "rejected":
                    refused = batch.refused_positions(result.condition)
            for i, (position, _) in enumerate(events):
                if refused is not None and i not in refused:
                    settle(position, ACCEPTED)
                else:
                    settle(position, result)
            after(result)

        self.transfers += 1
        self.transmit(batch.pack([data for _, data in events]), settled)

    def _one(self, position: int, data: bytes) -> None:
        self.sent += 1
        settle = self.settle
        after = self.after

        def settled(result: Any) -> None:
            settle(position, result)
            after(result)

        self.transfers += 1
        self.transmit(data, settled)
