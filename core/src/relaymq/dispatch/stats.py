"""Per-destination counters, kept as plain integers on the hot path."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(slots=True)
class DestinationStatistics:
    """What the console and metrics read; names follow ActiveMQ's JMX attributes."""

    enqueued: int = 0
    dequeued: int = 0
    dispatched: int = 0
    in_flight: int = 0
    expired: int = 0
    dead_lettered: int = 0
    pending: int = 0  # queue size: stored or in memory, not yet acknowledged
    consumers: int = 0
    producers: int = 0
    memory_used: int = 0
    duplicates: int = 0  # sends dropped by duplicate detection (`_AMQ_DUPL_ID` seen before)
    #: messages a newer one of their slot superseded (queue types: last value queues)
    replaced: int = 0
    #: messages that expired or failed too often and went to no dead message queue
    #: (queue types with `deadMessageQueue`); counted in `dead_lettered` too
    discarded: int = 0

    def snapshot(self) -> dict[str, int]:
        return asdict(self)
