"""The sink's sending with a rate (`maxRate`, `relaymq spark replay --rate`):
messages leave evenly spread, and the connection keeps working while it waits
(heartbeats, outcomes), also when the wait is longer than the broker's idle
time-out. A real broker process whose AMQP connector closes a connection silent
for one second."""

from __future__ import annotations

import time
from pathlib import Path

from brokers import BrokerProcess
from proton import Message
from relaymq_spark.client import Client, Endpoint
from relaymq_spark.sender import send_encoded


def test_a_slow_rate_keeps_the_connection_and_spreads_the_messages(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, connector_options="transport.idleTimeout=1000").start()
    try:
        messages = [bytes(Message(body=f"slow-{i}", address="queue://SLOW", durable=True).encode())
                    for i in range(12)]
        started = time.monotonic()
        sent = send_encoded(Endpoint(broker.url), iter(messages), window=100, rate=4.0)
        took = time.monotonic() - started
        assert sent == 12
        assert took >= 11 / 4.0  # message 11 leaves 2.75 s after the first: never faster
        got = Client(Endpoint(broker.url)).read("queue://SLOW", 0, 10**9)
        assert [m.body for _, m in got] == [f"slow-{i}" for i in range(12)]
    finally:
        broker.stop()
