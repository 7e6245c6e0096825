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


def test_topic_is_refused_with_a_hint(broker) -> None:
    with pytest.raises(RelayMQError, match="durable subscription"):
        Client(Endpoint(broker.url)).bounds("topic://T")


def test_unreachable_broker_is_a_clear_error() -> None:
    from brokers import free_port

    with pytest.raises(RelayMQError, match="127.0.0.1"):
        Client(Endpoint(f"amqp://127.0.0.1:{free_port()}", timeout=10, retry=1)).bounds("Q")


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
