"""A consumer that always releases cannot spin one message forever (issue 16.6).

Released (or modified without delivery-failed) is not a delivery attempt, so a
consumer that releases everything it gets kept one message going round without
end. Past `maximumReleases` releases a release counts as a failed delivery: the
redelivery policy applies, then the dead-letter queue, with the cause.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from proton import Message, Timeout
from proton.utils import BlockingConnection
from relaymq.config.model import PolicyEntryConfig
from relaymq.testing import broker_config


def _config(maximum_releases: int) -> Any:
    cfg = broker_config("amqp://127.0.0.1:0", "stomp://127.0.0.1:0")
    cfg.policy_entries = [PolicyEntryConfig(queue=">", maximum_releases=maximum_releases)]
    return cfg


def _release(conn: Any, address: str, times: int) -> None:
    """Receive and release a delivery of `address` `times` times (AssertionError when
    one does not come: the broker stopped redelivering early)."""
    receiver = conn.create_receiver(address, credit=1)
    for done in range(times):
        try:
            receiver.receive(timeout=20)
        except Timeout:
            raise AssertionError(f"delivery {done + 1} of {times} did not come") from None
        receiver.release(delivered=False)  # RELEASED: not a delivery attempt
    receiver.close()


def _stomp_receive(bt: Any, destination: str) -> Any:
    stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
    import threading

    got: list[Any] = []
    ready = threading.Event()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            got.append(frame)
            ready.set()

    host, _, port = bt.address("stomp").rpartition(":")
    conn = stomp.Connection12([(host, int(port))], heartbeats=(0, 0))
    conn.set_listener("", Listener())
    conn.connect(wait=True)
    try:
        conn.subscribe(destination, id="1", ack="auto")
        assert ready.wait(10), f"nothing arrived on {destination}"
        return got[0]
    finally:
        conn.disconnect()


def test_a_message_released_past_the_limit_reaches_the_dlq(make_broker: Any, caplog: Any) -> None:
    bt = make_broker(config=_config(maximum_releases=3))
    caplog.set_level(logging.INFO, "relaymq")
    conn = BlockingConnection(bt.url(), timeout=10)
    try:
        # persistent: ActiveMQ dead-letters only those by default (processNonPersistent)
        conn.create_sender("queue://spin").send(Message(body="hot", durable=True))
        # no redeliveryPolicy: ActiveMQ's default (6 redeliveries), each failed
        # delivery being 3 releases and one more; fewer fail here, more leave the
        # message in its queue (checked below) instead of in the DLQ
        _release(conn, "queue://spin", 7 * 4)
        # the cause travels with the dead-lettered copy (a STOMP header, as ActiveMQ's)
        dead = _stomp_receive(bt, "/queue/ActiveMQ.DLQ")
        assert dead.body == "hot"
        cause = dead.headers.get("dlqDeliveryFailureCause", "")
        assert "maximumReleases" in cause and "released" in cause, cause
        assert bt.queue_size("spin") == 0
    finally:
        conn.close()


def test_maximum_releases_minus_one_turns_the_guard_off(make_broker: Any) -> None:
    bt = make_broker(config=_config(maximum_releases=-1))
    conn = BlockingConnection(bt.url(), timeout=10)
    try:
        conn.create_sender("queue://spin.free").send(Message(body="x"))
        _release(conn, "queue://spin.free", 60)
        assert bt.queue_size("spin.free") == 1
    finally:
        conn.close()


@pytest.mark.slow
def test_the_default_limit_logs_once_past_the_warning_threshold(make_broker: Any, caplog: Any) -> None:
    """The default (10000) is not reached here; the warning at 1000 releases is,
    once, naming the destination."""
    bt = make_broker(config=broker_config("amqp://127.0.0.1:0"))
    caplog.set_level(logging.WARNING, "relaymq")
    conn = BlockingConnection(bt.url(), timeout=10)
    try:
        conn.create_sender("queue://spin.warn").send(Message(body="x"))
        _release(conn, "queue://spin.warn", 1500)
        warnings = [r.getMessage() for r in caplog.records if "released" in r.getMessage()]
        assert len(warnings) == 1 and "spin.warn" in warnings[0], warnings
        assert bt.queue_size("spin.warn") == 1
    finally:
        conn.close()
