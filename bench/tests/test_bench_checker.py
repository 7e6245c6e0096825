"""Loss / duplicate / order checking, including the JSON hop to the coordinator."""

from __future__ import annotations

import json

from relaymq_bench.checker import SequenceChecker, analyze


def report(checker: SequenceChecker) -> dict:
    return json.loads(json.dumps(checker.to_json()))  # what really crosses the process boundary


def feed(checker: SequenceChecker, producer: int, seqs, run: int = 1) -> SequenceChecker:
    for s in seqs:
        checker.record(run, producer, s)
    return checker


def test_clean_run_is_ok():
    c = feed(SequenceChecker(1, 100), 0, range(100))
    v = analyze([report(c)], {0: 100}, fanout=False)
    assert v.ok and v.expected == 100 and v.received == 100
    assert (v.lost, v.duplicates, v.out_of_order, v.unexpected) == (0, 0, 0, 0)


def test_loss_is_counted_with_examples():
    c = feed(SequenceChecker(1), 0, [s for s in range(50) if s not in (10, 11, 49)])
    v = analyze([report(c)], {0: 50}, fanout=False)
    assert not v.ok and v.lost == 3
    assert v.lost_examples == ["producer 0 seq 10 (+2 more)"]


def test_duplicates_and_reordering():
    c = feed(SequenceChecker(1), 0, [0, 1, 3, 2, 2, 4, 4, 4])
    v = analyze([report(c)], {0: 5}, fanout=False)
    assert v.duplicates == 3      # 2 once more, 4 twice more
    assert v.out_of_order == 1    # 2 arrived after 3
    assert v.lost == 0 and not v.ok


def test_foreign_runs_are_separated_not_mixed_in():
    c = SequenceChecker(1)
    feed(c, 0, range(10))
    feed(c, 0, range(5), run=99)  # leftovers from an older run
    c.record_foreign()            # a body without the bench prefix
    v = analyze([report(c)], {0: 10}, fanout=False)
    assert v.foreign == 6 and v.lost == 0 and v.duplicates == 0 and v.ok


def test_arrivals_beyond_accepted_are_unexpected_not_duplicates():
    c = feed(SequenceChecker(1), 0, range(12))
    v = analyze([report(c)], {0: 10}, fanout=False)
    assert v.unexpected == 2 and v.duplicates == 0 and v.lost == 0


def test_competing_consumers_are_merged():
    a = feed(SequenceChecker(1), 0, range(0, 100, 2))
    b = feed(SequenceChecker(1), 0, range(1, 100, 2))
    feed(a, 1, range(30))
    v = analyze([report(a), report(b)], {0: 100, 1: 40}, fanout=False)
    assert v.received == 130 and v.duplicates == 0 and v.out_of_order == 0
    assert v.lost == 10 and v.lost_examples == ["producer 1 seq 30 (+9 more)"]
    feed(b, 0, [5])  # the same message delivered to both consumers
    v = analyze([report(a), report(b)], {0: 100}, fanout=False)
    assert v.duplicates == 1


def test_fanout_requires_every_consumer_to_see_everything():
    full = feed(SequenceChecker(1), 0, range(20))
    partial = feed(SequenceChecker(1), 0, range(15))
    v = analyze([report(full), report(partial)], {0: 20}, fanout=True)
    assert v.expected == 40 and v.received == 35 and v.lost == 5
    assert v.lost_examples == ["consumer 1 producer 0 seq 15 (+4 more)"]
    missing_producer = analyze([report(full)], {0: 20, 1: 3}, fanout=True)
    assert missing_producer.lost == 3


def test_checker_grows_beyond_initial_size_and_saturates():
    c = SequenceChecker(1, expected_per_producer=4)
    feed(c, 0, [0, 1, 5000])
    for _ in range(300):
        c.record(1, 0, 1)
    v = analyze([report(c)], {0: 5001}, fanout=False)
    assert v.lost == 4998
    assert v.duplicates == 254  # counts saturate at 255 arrivals per message


def test_empty_report_means_everything_lost():
    v = analyze([report(SequenceChecker(1))], {0: 7}, fanout=False)
    assert v.lost == 7 and v.expected == 7
