"""What the exactly-once marker lists: the newest committed batches, not only the last."""

from __future__ import annotations

import json

from relaymq_bridge.marker import MarkerLedger, listed, window_size


def _listed(ledger: MarkerLedger, ids: list[str]) -> set[str]:
    return set(json.loads(bytes(ledger.marker(ids).body).decode()))


def test_marker_lists_earlier_batches_a_killed_source_may_redeliver() -> None:
    ledger = MarkerLedger(None, "/queue/m", 1.0, size=window_size(2))
    first, second = ["b:1", "b:2"], ["b:3", "b:4"]
    ledger.marker(first)
    ledger.committed_now()
    now = _listed(ledger, second)
    ledger.committed_now()
    assert all(listed(i, now) for i in first + second)
    assert not listed("b:5", now)


def test_marker_window_is_bounded_and_an_uncommitted_batch_is_not_kept() -> None:
    ledger = MarkerLedger(None, "/queue/m", 1.0, size=3)
    for i in range(5):
        ledger.marker([f"x:{i}"])
        ledger.committed_now()
    ledger.marker(["rolled:back"])  # its transaction never committed
    now = _listed(ledger, ["x:5"])
    assert [listed(f"x:{i}", now) for i in range(6)] == [False, False, False, True, True, True]
    assert not listed("rolled:back", now)


def test_marker_of_an_older_version_lists_whole_ids() -> None:
    assert listed("bridge:ID:1", {"bridge:ID:1"})
    assert not listed("bridge:ID:2", {"bridge:ID:1"})
