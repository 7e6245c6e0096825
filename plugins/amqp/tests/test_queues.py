"""Queues end to end with proton clients: order, credit, drain, settlement, every outcome."""

from __future__ import annotations

import time
from typing import Any

import pytest
from proton import Delivery, Message, byte, symbol, ulong
from proton.reactor import AtMostOnce
from proton.utils import SendException
from relaymq.model.destination import Destination
from relaymq.testing import wait_until


def wait_for(cond: Any, client: Any = None, timeout: float = 5.0) -> None:
    """Wait for a broker-side condition, letting `client` write what it queued
    (a blocking client only does I/O while it waits)."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        if client is not None:
            client.container.timeout = 0.01
            client.container.process()
        else:
            time.sleep(0.01)


def settle(receiver: Any, state: int, failed: bool = False, undeliverable: bool = False) -> None:
    """Settle the oldest received delivery with `state` and the modified flags."""
    d = receiver.fetcher.unsettled.popleft()
    if state == Delivery.MODIFIED:
        d.local.failed = failed
        d.local.undeliverable = undeliverable
    d.update(state)
    d.settle()


def test_send_and_receive_in_order_with_properties(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    s = c.create_sender("queue://orders")
    for i in range(50):
        s.send(Message(body=f"m{i}", id=f"ID:{i}", properties={"i": i}, subject="kind"))
    assert amqp_broker.queue_size("orders") == 50
    r = c.create_receiver("orders", credit=10)  # a bare name is a queue
    for i in range(50):
        m = r.receive(timeout=5)
        assert (m.body, m.id, m.properties, m.subject) == (f"m{i}", f"ID:{i}", {"i": i}, "kind")
        r.accept()
    wait_for(lambda: amqp_broker.queue_size("orders") == 0, c)


def test_encoded_bytes_are_forwarded_unchanged(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    sent = Message(body={"map": [1, 2]}, instructions={"x-opt-da": 1}, annotations={"x-opt-ma": "v"},
                   properties={"p": 1.5})
    c.create_sender("queue://raw").send(sent)
    broker = amqp_broker.broker
    stored = amqp_broker.call(
        lambda: broker.region.queues[Destination.queue("raw")].pending.peek().message)
    assert stored.encoding == "amqp" and stored.encoded == bytes(sent.encode())
    got = c.create_receiver("queue://raw", credit=1).receive(timeout=5)
    assert got.body == {"map": [1, 2]} and got.annotations == {"x-opt-ma": "v"}
    assert got.instructions == {"x-opt-da": 1} and got.properties == {"p": 1.5}


def test_competing_consumers_share_a_queue(connect: Any) -> None:
    c = connect()
    r1 = c.create_receiver("queue://shared", credit=5, name="r1")
    r2 = c.create_receiver("queue://shared", credit=5, name="r2")
    s = c.create_sender("queue://shared")
    for i in range(10):
        s.send(Message(body=i))
    got = []
    for r in (r1, r2):
        for _ in range(5):
            got.append(r.receive(timeout=5).body)
            r.accept()
    assert sorted(got) == list(range(10))


def test_no_credit_means_nothing_then_exactly_the_credit(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    s = c.create_sender("queue://credit")
    for i in range(5):
        s.send(Message(body=i))
    r = c.create_receiver("queue://credit", credit=0)

    def stats() -> dict[str, int]:
        return amqp_broker.call(lambda: amqp_broker.broker.destination_stats()["queue://credit"])

    # the broker has the consumer (dispatch had its chance) and sent it nothing
    wait_until(lambda: stats()["consumers"] == 1, "the consumer attached")
    assert stats()["dispatched"] == 0 and r.fetcher.has_message == 0
    r.link.flow(2)
    c.wait(lambda: r.fetcher.has_message == 2, timeout=5)
    # the broker counts every dispatch: two, and its credit is spent
    assert stats()["dispatched"] == 2 and stats()["in_flight"] == 2
    assert r.fetcher.has_message == 2
    assert amqp_broker.queue_size("credit") == 5  # delivered, not acknowledged


def test_drain_delivers_what_is_there_then_zeroes_the_credit(connect: Any) -> None:
    c = connect()
    s = c.create_sender("queue://drain")
    for i in range(3):
        s.send(Message(body=i))
    r = c.create_receiver("queue://drain", credit=0)
    r.link.drain(10)
    c.wait(lambda: r.fetcher.has_message == 3 and not r.link.draining(), timeout=5)
    assert r.link.credit == 0
    # an empty queue drains at once
    r2 = c.create_receiver("queue://drain-empty", credit=0)
    r2.link.drain(5)
    c.wait(lambda: not r2.link.draining(), timeout=5)
    assert r2.link.credit == 0 and r2.fetcher.has_message == 0


def test_presettled_sends_arrive(connect: Any) -> None:
    c = connect()
    s = c.create_sender("queue://fast", options=AtMostOnce())
    for i in range(20):
        s.send(Message(body=i))
    r = c.create_receiver("queue://fast", credit=20)
    assert [r.receive(timeout=5).body for _ in range(20)] == list(range(20))


def test_presettled_consumer_acknowledges_on_send(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    c.create_sender("queue://amo").send(Message(body="x"))
    r = c.create_receiver("queue://amo", credit=5, options=AtMostOnce())
    assert r.receive(timeout=5).body == "x"
    wait_for(lambda: amqp_broker.queue_size("amo") == 0, c)


def test_released_returns_the_message_uncounted(connect: Any) -> None:
    c = connect()
    c.create_sender("queue://rel").send(Message(body="again"))
    r = c.create_receiver("queue://rel", credit=1)
    assert r.receive(timeout=5).body == "again"
    settle(r, Delivery.RELEASED)
    m = r.receive(timeout=5)
    assert m.body == "again" and m.delivery_count == 0
    r.accept()


def test_modified_failed_redelivers_with_a_delivery_count(connect: Any) -> None:
    c = connect()
    c.create_sender("queue://mod").send(Message(body="x", durable=True, priority=6))
    r = c.create_receiver("queue://mod", credit=1)
    first = r.receive(timeout=5)
    assert first.delivery_count == 0
    settle(r, Delivery.MODIFIED, failed=True)
    m = r.receive(timeout=5)
    assert (m.body, m.delivery_count, m.first_acquirer, m.durable, m.priority) == ("x", 1, False, True, 6)
    r.accept()


@pytest.mark.parametrize("failed", [False, True], ids=["undeliverable", "failed-undeliverable"])
def test_modified_undeliverable_here_is_never_redelivered_to_that_link(
        connect: Any, amqp_broker: Any, failed: bool) -> None:
    c = connect()
    c.create_sender("queue://undel").send(Message(body="not for me", id="ID:u", durable=True))
    r = c.create_receiver("queue://undel", credit=5)
    assert r.receive(timeout=5).body == "not for me"
    settle(r, Delivery.MODIFIED, failed=failed, undeliverable=True)
    dlq = c.create_receiver("queue://ActiveMQ.DLQ", credit=1)
    m = dlq.receive(timeout=5)
    assert (m.body, m.id) == ("not for me", "ID:u")
    assert m.annotations["x-opt-original-destination"] == "queue://undel"
    assert amqp_broker.queue_size("undel") == 0
    assert not r.fetcher.incoming  # it did not come back to the link that refused it


def test_modified_without_flags_is_a_release(connect: Any) -> None:
    c = connect()
    c.create_sender("queue://mod0").send(Message(body="x"))
    r = c.create_receiver("queue://mod0", credit=1)
    r.receive(timeout=5)
    settle(r, Delivery.MODIFIED)
    assert r.receive(timeout=5).delivery_count == 0


def test_rejected_goes_to_the_dead_letter_queue(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    c.create_sender("queue://rej").send(Message(body="poison", durable=True, id="ID:p"))
    r = c.create_receiver("queue://rej", credit=1)
    r.receive(timeout=5)
    r.reject()
    dlq = c.create_receiver("queue://ActiveMQ.DLQ", credit=1)
    m = dlq.receive(timeout=5)
    assert m.body == "poison" and m.id == "ID:p"
    assert m.annotations["x-opt-original-destination"] == "queue://rej"
    assert amqp_broker.queue_size("rej") == 0


def test_a_dead_letter_copy_keeps_the_producers_message_annotations(connect: Any) -> None:
    """The copy in the DLQ is re-encoded (it says where it came from); the producer's
    own message annotations stay on it, with their AMQP types, as Artemis keeps them."""
    c = connect()
    c.create_sender("queue://rej.ann").send(Message(
        body="poison", durable=True, id="ID:pa", properties={"k": "v"},
        annotations={symbol("x-opt-trace"): "t-1", symbol("x-opt-hops"): ulong(3),
                     symbol("x-opt-jms-dest"): byte(0)}))
    r = c.create_receiver("queue://rej.ann", credit=1)
    r.receive(timeout=5)
    r.reject()
    m = c.create_receiver("queue://ActiveMQ.DLQ", credit=1).receive(timeout=5)
    assert m.body == "poison" and m.id == "ID:pa" and m.properties == {"k": "v"}
    assert m.annotations["x-opt-trace"] == "t-1"
    assert m.annotations["x-opt-hops"] == 3 and isinstance(m.annotations["x-opt-hops"], ulong)
    assert m.annotations["x-opt-original-destination"] == "queue://rej.ann"
    assert "amqp_message_annotations" not in m.annotations
    assert not any("amqp-message-annotations" in str(k) for k in m.annotations)


@pytest.mark.slow
def test_too_many_failures_dead_letter_the_message(connect: Any) -> None:
    c = connect()
    c.create_sender("queue://flaky").send(Message(body="x", durable=True))
    r = c.create_receiver("queue://flaky", credit=1)
    counts = []
    for _ in range(7):  # the default policy: 6 redeliveries
        counts.append(r.receive(timeout=10).delivery_count)
        settle(r, Delivery.MODIFIED, True)
    assert counts == list(range(7))
    dlq = c.create_receiver("queue://ActiveMQ.DLQ", credit=1)
    assert dlq.receive(timeout=10).body == "x"


def test_unacknowledged_messages_return_when_the_consumer_closes(connect: Any) -> None:
    c = connect()
    c.create_sender("queue://back").send(Message(body="x"))
    r = c.create_receiver("queue://back", credit=1)
    r.receive(timeout=5)
    r.close()
    m = c.create_receiver("queue://back", credit=1, name="second").receive(timeout=5)
    assert m.body == "x" and m.delivery_count == 1


def test_large_message_in_many_frames(make_broker: Any, connect: Any) -> None:
    bt = make_broker("amqp://127.0.0.1:0?maxFrameSize=4096")
    c = connect(bt.url())
    body = bytes(range(256)) * 4096 * 3  # 3 MiB
    c.create_sender("queue://big").send(Message(body=body), timeout=30)
    m = c.create_receiver("queue://big", credit=1).receive(timeout=30)
    assert m.body == body


def test_message_size_limit_detaches_the_producer(make_broker: Any, connect: Any) -> None:
    bt = make_broker("amqp://127.0.0.1:0?maxMessageSize=1000")
    c = connect(bt.url())
    s = c.create_sender("queue://limited")
    s.send(Message(body=b"x" * 100))
    with pytest.raises(Exception, match="message-size-exceeded"):
        s.send(Message(body=b"x" * 5000))


def test_refused_send_is_rejected_with_a_condition(make_broker: Any, connect: Any,
                                                   refusing_writes: Any) -> None:
    bt = make_broker(setup=refusing_writes("secret"))
    c = connect(bt.url())
    relay = c.create_sender(None)
    relay.send(Message(address="queue://open", body="ok"))
    with pytest.raises(SendException) as err:
        relay.send(Message(address="queue://secret", body="no"))
    assert err.value.state == Delivery.REJECTED
    with pytest.raises(Exception, match="unauthorized-access"):
        c.create_sender("queue://secret")


def test_memory_limit_with_send_fail_rejects_with_resource_limit(make_broker: Any, connect: Any) -> None:
    from relaymq.config.model import SystemUsageConfig, UsageLimit
    from relaymq.testing import broker_config

    cfg = broker_config("amqp://127.0.0.1:0", system_usage=SystemUsageConfig(
        memory=UsageLimit(limit=64 * 1024), send_fail_if_no_space=True))
    bt = make_broker(config=cfg)
    c = connect(bt.url())
    s = c.create_sender("queue://full")
    with pytest.raises(SendException) as err:
        for _ in range(200):
            s.send(Message(body=b"x" * 4096))
    assert err.value.state == Delivery.REJECTED
    assert s.link.remote_condition is None  # the link stays usable


def test_unauthorized_consumer_is_refused(make_broker: Any, connect: Any) -> None:
    from proton.utils import LinkDetached
    from relaymq.hookspecs import hookimpl

    class NoReads:
        @hookimpl
        def relaymq_authorize(self, action: str, destination: Any) -> bool | None:
            return False if action == "read" else None

    bt = make_broker(setup=lambda b: b.plugins.register(NoReads()))
    c = connect(bt.url())
    with pytest.raises(LinkDetached) as err:
        c.create_receiver("queue://private", credit=1)
    assert err.value.condition == "amqp:unauthorized-access"


def test_deleting_the_queue_detaches_its_consumers(connect: Any, amqp_broker: Any) -> None:
    from proton.utils import LinkDetached
    from relaymq.model.destination import Destination

    c = connect()
    r = c.create_receiver("queue://doomed", credit=1)
    amqp_broker.run(amqp_broker.broker.delete_destination(Destination.queue("doomed")))
    with pytest.raises(LinkDetached, match="resource-deleted"):
        r.receive(timeout=5)


def test_outcomes_written_together_with_a_detach_keep_their_order(connect: Any, amqp_broker: Any) -> None:
    """A client that settles several deliveries and closes its link in one write:
    the accepted ones are acknowledged (never redelivered); the released one and
    those never settled come back."""
    c = connect()
    s = c.create_sender("queue://together")
    for i in range(6):
        s.send(Message(body=f"t{i}"))
    r = c.create_receiver("queue://together", credit=6)
    for _ in range(6):
        r.receive(timeout=5)
    for state in (Delivery.ACCEPTED, Delivery.ACCEPTED, Delivery.RELEASED, Delivery.ACCEPTED):
        settle(r, state)
    r.close()  # t4 and t5 were never settled
    wait_for(lambda: amqp_broker.queue_size("together") == 3, c)
    r2 = c.create_receiver("queue://together", credit=10)
    got = []
    for _ in range(3):
        m = r2.receive(timeout=5)
        got.append(m.body)
        r2.accept()
    assert sorted(got) == ["t2", "t4", "t5"]
    wait_for(lambda: amqp_broker.queue_size("together") == 0, c)


def test_the_amqp_barrier_returns_what_came_before_its_marker(connect: Any) -> None:
    from relaymq.testing.barriers import amqp_before_marker

    conn = connect()
    receiver = conn.create_receiver("queue://barrier", credit=10)
    sender = conn.create_sender("queue://barrier")
    sender.send(Message(body="before"))
    assert amqp_before_marker(conn, "queue://barrier", receiver) == ["before"]
    assert amqp_before_marker(conn, "queue://barrier", receiver) == []
