"""Sequence-range links on a real broker, through the Spark plugin's AMQP client
(no Spark): bounds, ranges, releases, and bad input."""

from __future__ import annotations

import pytest
from proton import Message
from relaymq_spark.client import Client, Endpoint, RelayMQError


def send(url: str, dest: str, n: int, start: int = 0) -> None:
    assert Client(Endpoint(url)).send(
        Message(body=f"m{i}", address=f"queue://{dest}", properties={"i": i})
        for i in range(start, start + n)) == n


def test_bounds_range_and_release(broker) -> None:
    c = Client(Endpoint(broker.url))
    send(broker.url, "R1", 300)
    assert c.bounds("R1") == (1, 300)
    got = c.read("R1", 10, 250)
    assert [s for s, _ in got] == list(range(11, 251))
    assert [m.body for _, m in got[:2]] == ["m10", "m11"]
    assert got[0][1].properties == {"i": 10}
    # reading consumed nothing: the same range again gives the same messages
    assert [s for s, _ in c.read("R1", 10, 250)] == list(range(11, 251))
    c.release("R1", 100)
    assert c.bounds("R1") == (101, 300)
    assert [s for s, _ in c.read("R1", 0, 105)] == list(range(101, 106))


def test_range_beyond_last_stops_at_last(broker) -> None:
    c = Client(Endpoint(broker.url))
    send(broker.url, "R2", 5)
    assert [s for s, _ in c.read("R2", 3, 1000)] == [4, 5]


def test_unknown_destination_is_a_clear_error(broker) -> None:
    with pytest.raises(RelayMQError, match="queue://NOPE does not exist"):
        Client(Endpoint(broker.url)).bounds("NOPE")


def test_release_of_an_unknown_destination_is_a_clear_error(broker) -> None:
    with pytest.raises(RelayMQError, match="queue://NOPE does not exist"):
        Client(Endpoint(broker.url)).release("NOPE", 10)


@pytest.mark.slow  # a long run or a restart: compiled build only (docs/testing.md)
def test_bounds_and_releases_ride_out_a_broker_restart(broker) -> None:
    """The driver's short calls (relaymq-amqp's connection) retry while the broker
    is away and answer once it is back."""
    import threading

    send(broker.url, "R5", 20)
    c = Client(Endpoint(broker.url, retry=60))
    for call in (lambda: c.bounds("R5"), lambda: c.release("R5", 5)):
        broker.kill()
        restarter = threading.Timer(1.0, broker.start)
        restarter.start()
        try:
            call()
        finally:
            restarter.join()
    assert c.bounds("R5") == (6, 20)


def test_topic_is_refused_with_a_hint(broker) -> None:
    with pytest.raises(RelayMQError, match="durable subscription"):
        Client(Endpoint(broker.url)).bounds("topic://T")


def test_unreachable_broker_is_a_clear_error() -> None:
    from brokers import free_port

    with pytest.raises(RelayMQError, match="127.0.0.1"):
        Client(Endpoint(f"amqp://127.0.0.1:{free_port()}", timeout=10, retry=1)).bounds("Q")


@pytest.mark.slow  # a long run or a restart: compiled build only (docs/testing.md)
def test_reads_ride_out_a_broker_restart(broker) -> None:
    import threading

    send(broker.url, "R3", 50)
    broker.kill()
    restarter = threading.Timer(1.0, broker.start)
    restarter.start()
    try:
        got = Client(Endpoint(broker.url, retry=60)).read("R3", 0, 50)
    finally:
        restarter.join()
    assert [s for s, _ in got] == list(range(1, 51))


def test_encoded_reads_come_in_batches_with_every_message(broker) -> None:
    c = Client(Endpoint(broker.url))
    send(broker.url, "R4", 1234)
    calls: list[list[int]] = []
    c.read_encoded("R4", 100, 1200, lambda recs: calls.append([s for s, _, _ in recs]),
                   batch=300)
    assert [s for call in calls for s in call] == list(range(101, 1201))
    assert max(len(call) for call in calls) == 300 and len(calls) == 4  # batched transfers
    got: list[tuple[int, int, bytes]] = []
    c.read_encoded("R4", 0, 3, got.extend, batch=300)
    decoded = [Message() for _ in got]
    for m, (_, _, data) in zip(decoded, got, strict=True):
        m.decode(data)  # the stored AMQP bytes, as sent
    assert [m.body for m in decoded] == ["m0", "m1", "m2"]
    assert [m.properties for m in decoded] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert all(stamp > 0 for _, stamp, _ in got)  # the broker's timestamp
    # driven by its consumer: the read pauses (yields) once asked to, and goes on after
    for at in (250, 100, 100, 100):
        handed, asked = _paused_read(broker.url, "R4", 1234, at)
        assert [s for part in handed for s in part] == list(range(1, 1235))
        assert len(handed) >= 2 and all(a >= at for a in asked), (asked, at)
        # while paused no credit is granted: after the pause was asked only what was
        # granted then still arrives (prefetch 4, one of them the transfer that asked),
        # also when the pause is asked while the link is still opening
        assert all(len(part) <= a + 3 * 100 for part, a in zip(handed, asked, strict=False)), \
            ([len(part) for part in handed], asked)
    with pytest.raises(RelayMQError, match="queue://NOPE does not exist"):
        c.read_encoded("NOPE", 0, 10, got.extend)


@pytest.mark.slow  # a long run or a restart: compiled build only (docs/testing.md)
def test_encoded_reads_ride_out_a_broker_restart(broker) -> None:
    import threading

    send(broker.url, "R5", 700)
    broker.kill()
    restarter = threading.Timer(1.0, broker.start)
    restarter.start()
    got: list[int] = []
    try:
        Client(Endpoint(broker.url, retry=60)).read_encoded(
            "R5", 0, 700, lambda recs: got.extend(s for s, _, _ in recs), batch=64)
    finally:
        restarter.join()
    assert got == list(range(1, 701))


def test_partitions_split_for_parallel_reads() -> None:
    from relaymq_spark.ranges import split

    parts = split("queue://Q", 0, 20_000, per_partition=10_000, min_partitions=4)
    assert [(p.after, p.until) for p in parts] == [(0, 5000), (5000, 10_000), (10_000, 15_000),
                                                   (15_000, 20_000)]
    # never partitions of fewer than 1000 messages only to reach min_partitions
    assert [(p.after, p.until) for p in split("queue://Q", 10, 1510, 10_000, 4)] == [(10, 1510)]
    assert len(split("queue://Q", 0, 25_000, per_partition=10_000, min_partitions=2)) == 3
    assert split("queue://Q", 5, 5, 10_000, 2) == []


def _paused_read(url: str, dest: str, until: int, at: int) -> tuple[list[list[int]], list[int]]:
    """Read `dest` up to `until` in transfers of 100, pausing once `at` rows are
    held; a slow consumer until the first hand-over (every granted transfer is
    there before it takes the rows). The parts handed over, and how many rows
    were held when each pause was asked."""
    import time

    from relaymq_spark.range_read import read_encoded

    held: list[int] = []
    handed: list[list[int]] = []
    asked: list[int] = []

    def on_batch(recs: list[tuple[int, int, bytes]]) -> None:
        held.extend(s for s, _, _ in recs)
        if not handed:
            time.sleep(0.05)  # a consumer slower than the broker

    def pause() -> bool:
        if len(held) < at:
            return False
        if len(asked) == len(handed):
            asked.append(len(held))
        return True

    for _ in read_encoded(Endpoint(url), dest, 0, until, on_batch, batch=100, pause=pause):
        handed.append(held[:])
        held.clear()
    handed.append(held)
    return handed, asked
