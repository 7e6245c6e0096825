"""Loss, duplicate and order checking for received bench messages.

Why a per-producer byte array: each producer numbers its messages 0..n-1, so
"seen how many times" fits one byte per sequence number.  Recording is a
couple of index operations (cheap enough for the receive hot path), and the
arrays travel to the coordinator as zlib+base64 JSON, where they are summed
(competing consumers on a queue) or checked one by one (topic fan-out, where
every subscriber must see everything).

Order is checked per consumer and per producer: a first arrival whose
sequence number is below the highest already seen counts as out of order.
That is the guarantee both JMS-style brokers and RabbitMQ give for one
producer and one queue, and it still holds for each consumer of a shared
queue (each sees an increasing subsequence).
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class SequenceChecker:
    """Records (producer, seq) arrivals for one consumer."""

    __slots__ = ("run", "_states", "_last_producer", "_last_state", "foreign", "received",
                 "_initial")

    def __init__(self, run: int, expected_per_producer: int = 0):
        self.run = run
        self._initial = expected_per_producer
        # producer -> [counts: bytearray, highest seq seen, out-of-order count]
        self._states: dict[int, list[Any]] = {}
        self._last_producer = -1
        self._last_state: list[Any] = []
        self.foreign = 0  # bodies without our magic or from another run
        self.received = 0

    def _state(self, producer: int) -> list[Any]:
        st = self._states.get(producer)
        if st is None:
            st = [bytearray(self._initial), -1, 0]
            self._states[producer] = st
        self._last_producer = producer
        self._last_state = st
        return st

    def record(self, run: int, producer: int, seq: int) -> None:
        """Record one arrival; called once per received message."""
        if run != self.run:
            self.foreign += 1
            return
        self.received += 1
        st = self._last_state if producer == self._last_producer else self._state(producer)
        counts = st[0]
        if seq >= len(counts):
            counts.extend(bytes(max(seq + 1 - len(counts), len(counts), 1024)))
        c = counts[seq]
        if c:
            if c < 255:
                counts[seq] = c + 1
        else:
            counts[seq] = 1
            if seq < st[1]:
                st[2] += 1
            else:
                st[1] = seq

    def record_foreign(self) -> None:
        self.foreign += 1

    def to_json(self) -> dict[str, Any]:
        """JSON-safe summary (counts compressed) for the coordinator."""
        producers = {}
        for pid, (counts, high, ooo) in self._states.items():
            trimmed = bytes(counts[: high + 1]) if high >= 0 else b""
            # keep trailing duplicates of seqs <= high; anything above high is zero anyway
            producers[str(pid)] = {
                "counts": base64.b64encode(zlib.compress(trimmed, 6)).decode("ascii"),
                "out_of_order": ooo,
            }
        return {"producers": producers, "foreign": self.foreign, "received": self.received}


def decode_counts(blob: str) -> bytearray:
    return bytearray(zlib.decompress(base64.b64decode(blob)))


@dataclass
class CheckResult:
    """Verdict for a run; ``ok`` means no loss, duplicates or disorder."""

    expected: int = 0      # messages that should have arrived (per subscriber for topics)
    received: int = 0      # all arrivals of this run's messages, duplicates included
    lost: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    unexpected: int = 0    # arrivals with seq beyond what the producer saw accepted
    foreign: int = 0
    lost_examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Foreign bodies (leftovers of other runs) are reported but are not this run's fault."""
        return not (self.lost or self.duplicates or self.out_of_order)

    def as_dict(self) -> dict[str, Any]:
        return {
            "expected": self.expected, "received": self.received, "lost": self.lost,
            "duplicates": self.duplicates, "out_of_order": self.out_of_order,
            "unexpected": self.unexpected, "foreign": self.foreign, "ok": self.ok,
            "lost_examples": self.lost_examples,
        }


def _merge(into: bytearray, other: bytes | bytearray) -> None:
    if len(other) > len(into):
        into.extend(bytes(len(other) - len(into)))
    for i, c in enumerate(other):
        if c:
            into[i] = min(255, into[i] + c)


def _tally(result: CheckResult, counts: bytearray, accepted: int, label: str) -> None:
    head = counts[:accepted]
    if len(head) < accepted:
        head = head + bytes(accepted - len(head))
    lost = head.count(0)
    result.expected += accepted
    result.lost += lost
    result.duplicates += sum(head) - (accepted - lost)
    tail = counts[accepted:]
    result.unexpected += sum(tail)
    if lost and len(result.lost_examples) < 5:
        first = head.index(0)
        result.lost_examples.append(f"{label}seq {first} (+{lost - 1} more)")


def analyze(reports: Iterable[Mapping[str, Any]], accepted: Mapping[int, int],
            fanout: bool) -> CheckResult:
    """Combine consumer reports (``SequenceChecker.to_json``) into one verdict.

    ``accepted`` maps producer index to the number of messages the broker
    accepted from it.  With ``fanout`` every report must hold everything (topic
    subscribers); otherwise the reports are summed (competing consumers).
    """
    reports = list(reports)
    result = CheckResult()
    for rep in reports:
        result.foreign += rep.get("foreign", 0)
        for p in rep["producers"].values():
            result.out_of_order += p["out_of_order"]
    if fanout:
        for ci, rep in enumerate(reports):
            for pid, n in accepted.items():
                p = rep["producers"].get(str(pid))
                counts = decode_counts(p["counts"]) if p else bytearray()
                result.received += sum(counts)
                _tally(result, counts, n, f"consumer {ci} producer {pid} ")
        return result
    merged: dict[int, bytearray] = {pid: bytearray() for pid in accepted}
    for rep in reports:
        for pid_s, p in rep["producers"].items():
            pid = int(pid_s)
            _merge(merged.setdefault(pid, bytearray()), decode_counts(p["counts"]))
    for pid, counts in merged.items():
        result.received += sum(counts)
        _tally(result, counts, accepted.get(pid, 0), f"producer {pid} ")
    return result
