"""Scheduled delivery asked for over AMQP (broker `schedulerSupport`): ActiveMQ's
`AMQ_SCHEDULED_*` application properties and the `x-opt-delivery-time` /
`x-opt-delivery-delay` message annotations of Qpid JMS and Artemis."""

from __future__ import annotations

import time
from typing import Any

import pytest
from proton import Message, symbol


@pytest.fixture
def scheduling_broker(make_broker: Any) -> Any:
    return make_broker("amqp://127.0.0.1:0", scheduler_support=True)


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.mark.parametrize("how", ["property", "delivery-time", "delivery-delay"])
def test_a_delayed_message_arrives_not_before_its_time(connect: Any, scheduling_broker: Any,
                                                       how: str) -> None:
    c = connect(scheduling_broker.url())
    sent = now_ms()
    if how == "property":
        m = Message(body=how, properties={"AMQ_SCHEDULED_DELAY": 800})
    elif how == "delivery-time":
        m = Message(body=how, annotations={symbol("x-opt-delivery-time"): sent + 800})
    else:
        m = Message(body=how, annotations={symbol("x-opt-delivery-delay"): 800})
    c.create_sender("queue://SCHED").send(m)
    assert scheduling_broker.queue_size("SCHED") == 0  # waiting in the scheduler
    r = c.create_receiver("queue://SCHED", credit=1)
    got = r.receive(timeout=10)
    assert got.body == how and now_ms() >= sent + 800
    r.accept()


def test_a_scheduled_message_keeps_the_producers_message_annotations(
        connect: Any, scheduling_broker: Any) -> None:
    """The scheduler delivers a copy; it keeps the producer's own annotations, not the
    request it already carried out (sent on, it would be held again)."""
    c = connect(scheduling_broker.url())
    c.create_sender("queue://SCHED.A").send(Message(body="later", annotations={
        symbol("x-opt-delivery-delay"): 300, symbol("x-opt-trace"): "t-2"}))
    r = c.create_receiver("queue://SCHED.A", credit=1)
    got = r.receive(timeout=10)
    assert got.body == "later" and got.annotations["x-opt-trace"] == "t-2"
    assert "x-opt-delivery-delay" not in got.annotations
    r.accept()


def test_period_and_repeat_properties(connect: Any, scheduling_broker: Any) -> None:
    c = connect(scheduling_broker.url())
    c.create_sender("queue://SCHED.R").send(Message(body="tick", properties={
        "AMQ_SCHEDULED_DELAY": 100, "AMQ_SCHEDULED_PERIOD": 100, "AMQ_SCHEDULED_REPEAT": 2}))
    r = c.create_receiver("queue://SCHED.R", credit=10)
    ids = set()
    for _ in range(3):
        m = r.receive(timeout=10)
        assert m.body == "tick"
        ids.add(m.id)
        r.accept()
    assert len(ids) == 3  # each repetition is a new message


def test_a_delivery_time_in_the_past_is_delivered_now(connect: Any,
                                                     scheduling_broker: Any) -> None:
    c = connect(scheduling_broker.url())
    c.create_sender("queue://SCHED.P").send(Message(
        body="past", annotations={symbol("x-opt-delivery-time"): now_ms() - 60000}))
    assert scheduling_broker.queue_size("SCHED.P") == 1
