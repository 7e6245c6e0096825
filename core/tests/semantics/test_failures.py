"""Redelivery policy, dead-letter strategies and expiry, over vm://, STOMP and AMQP
(each scenario names the transports that can express it: STOMP settles only with
ACK and NACK and does not show a delivery count)."""

from __future__ import annotations

import asyncio

from relaymq.config.model import BrokerConfig, PluginElement
from relaymq.model.destination import Destination
from relaymq.testing import wait_until_async
from relaymq.testing.barriers import before_marker
from relaymq.testing.transports import expiration, original_destination, original_expiration

from .conftest import dlq_strategy, over, policy

ALL = ("vm", "stomp", "amqp")


def redelivery_plugin(default: dict[str, str] | None = None, **entries: dict[str, str]) -> PluginElement:
    """<redeliveryPlugin> as activemq.xml nests it."""
    policies = [PluginElement("redeliveryPolicy", {"queue": q, **attrs}) for q, attrs in entries.items()]
    children = [PluginElement("redeliveryPolicyEntries", {}, policies)]
    if default is not None:
        children.append(PluginElement("defaultEntry", {}, [PluginElement("redeliveryPolicy", default)]))
    inner = PluginElement("redeliveryPolicyMap", {}, children)
    return PluginElement("redeliveryPlugin", {"fallbackToDeadLetter": "true",
                                              "sendToDlqIfMaxRetriesExceeded": "true"},
                         [PluginElement("redeliveryPolicyMap", {}, [inner])])


def dead_lettered(b, key: str):  # type: ignore[no-untyped-def]
    return lambda: b.destination_stats().get(key, {}).get("dead_lettered", 0)


@over(*ALL)
async def test_nack_without_policy_dead_letters_at_once(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("queue://ORDERS", "poison", persistent=True, properties={"k": "v"},
                 correlation_id="c-1", type="order")
    c = await p.consumer("queue://ORDERS", ack_mode="individual")
    delivered = await c.receive(5)
    delivered.nack()
    dlq = await p.consumer("queue://ActiveMQ.DLQ")
    dead = await dlq.receive(5)
    assert dead is not None and dead.body == b"poison"
    assert dead.message_id == delivered.message_id
    assert dead.properties == {"k": "v"} and dead.correlation_id == "c-1" and dead.type == "order"
    assert original_destination(dead) == "queue://ORDERS"
    assert b.queue_size("ORDERS") == 0
    assert await before_marker(p, "queue://ORDERS", c, ack=True) == []  # not redelivered


@over(*ALL)
async def test_non_persistent_messages_are_not_dead_lettered_by_default(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("queue://NP", "gone")
    c = await p.consumer("queue://NP", ack_mode="individual")
    (await c.receive(5)).nack()
    await wait_until_async(dead_lettered(b, "queue://NP"), "the nack counted as dead-lettered")
    assert b.queue_size("ActiveMQ.DLQ") == 0 and b.queue_size("NP") == 0
    assert b.destination_stats()["queue://NP"]["dead_lettered"] == 1


@over(*ALL)
async def test_process_non_persistent_dead_letters_them(make_broker, connect):
    cfg = BrokerConfig(persistent=False, policy_entries=[
        policy(queue=">", dead_letter_strategy=dlq_strategy(process_non_persistent=True))])
    b = await make_broker(cfg)
    p = await connect(b)
    await p.send("queue://NP2", "kept")
    c = await p.consumer("queue://NP2", ack_mode="individual")
    (await c.receive(5)).nack()
    await wait_until_async(lambda: b.queue_size("ActiveMQ.DLQ") == 1, "the copy in ActiveMQ.DLQ")
    assert b.queue_size("NP2") == 0


@over("vm", "amqp", process=False)  # reads the broker's redelivery policy object
async def test_redelivery_policy_retries_with_backoff_then_dead_letters(make_broker, connect):
    cfg = BrokerConfig(persistent=False, plugins=[redelivery_plugin(**{"REDELIVERY.>": {
        "maximumRedeliveries": "3", "initialRedeliveryDelay": "20", "redeliveryDelay": "20",
        "useExponentialBackOff": "true", "backOffMultiplier": "2"}})])
    b = await make_broker(cfg)
    p = await connect(b)
    await p.send("queue://REDELIVERY.A", "flaky", persistent=True)
    c = await p.consumer("queue://REDELIVERY.A", ack_mode="individual")
    seen = []
    for _ in range(4):
        m = await c.receive(5)
        assert m is not None
        seen.append((m.redelivered, m.delivery_count))
        m.nack()
    assert seen == [(False, 1), (True, 2), (True, 3), (True, 4)]
    policy = b.redelivery.policy_for(Destination.queue("REDELIVERY.A"))
    assert [policy.delay_for(n) for n in (1, 2, 3)] == [0.02, 0.04, 0.08]
    dlq = await p.consumer("queue://ActiveMQ.DLQ")
    assert (await dlq.receive(5)).body == b"flaky"
    # dead-lettered, so not also scheduled for a fifth delivery (one would come back first)
    assert await before_marker(p, "queue://REDELIVERY.A", c, ack=True) == []
    assert b.destination_stats()["queue://REDELIVERY.A"]["dispatched"] == 5  # 4 + the marker


@over(*ALL)
async def test_policy_default_entry_and_unmatched_destinations(make_broker, connect):
    cfg = BrokerConfig(persistent=False, plugins=[redelivery_plugin(
        default={"maximumRedeliveries": "1", "initialRedeliveryDelay": "0"})])
    b = await make_broker(cfg)
    p = await connect(b)
    await p.send("queue://ANY", "x", persistent=True)
    c = await p.consumer("queue://ANY", ack_mode="individual")
    first = await c.receive(5)
    assert not first.redelivered
    first.nack()
    m = await c.receive(5)
    assert m.redelivered
    m.nack()
    await wait_until_async(lambda: b.queue_size("ActiveMQ.DLQ") == 1, "the copy in ActiveMQ.DLQ")
    assert b.queue_size("ANY") == 0
    assert await before_marker(p, "queue://ANY", c, ack=True) == []


@over(*ALL)
async def test_consumers_that_leave_holding_a_message_do_not_use_up_the_policy(make_broker,
                                                                              connect):
    """A consumer that leaves without settling a delivery failed nothing the broker can
    tell (it may never have reached the application): after more departures than
    maximumRedeliveries allows failures, the message is still delivered, marked
    redelivered, and nothing is dead-lettered."""
    cfg = BrokerConfig(persistent=False, plugins=[redelivery_plugin(
        default={"maximumRedeliveries": "1", "initialRedeliveryDelay": "0"})])
    b = await make_broker(cfg)
    p = await connect(b)
    await p.send("queue://LEFT", "held", persistent=True)
    for n in range(4):  # delivered, then again after each departure; never settled
        c = await p.consumer("queue://LEFT", ack_mode="individual")
        m = await c.receive(5)
        assert m is not None and m.text == "held" and m.redelivered == bool(n)
        await c.close()
    c = await p.consumer("queue://LEFT", ack_mode="individual")
    m = await c.receive(5)
    assert m is not None and m.text == "held" and m.redelivered
    m.ack()
    assert await before_marker(p, "queue://LEFT", c, ack=True) == []  # settled: not again
    assert b.queue_size("ActiveMQ.DLQ") == 0
    assert b.destination_stats()["queue://LEFT"]["dead_lettered"] == 0


@over("vm", "amqp")
async def test_failed_delivery_without_plugin_retries_six_times(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("queue://F", "x", persistent=True)
    c = await p.consumer("queue://F", ack_mode="individual")
    counts = []
    for _ in range(7):
        m = await c.receive(5)
        assert m is not None, f"delivery {len(counts) + 1} did not come; before it: {counts}"
        counts.append(m.delivery_count)
        m.fail()
    assert counts == [1, 2, 3, 4, 5, 6, 7]
    await wait_until_async(lambda: b.queue_size("ActiveMQ.DLQ") == 1, "the copy in ActiveMQ.DLQ")
    assert await before_marker(p, "queue://F", c, ack=True) == []  # no eighth delivery


@over("vm", "amqp")
async def test_reject_goes_to_dlq_immediately(make_broker, connect):
    cfg = BrokerConfig(persistent=False, plugins=[redelivery_plugin(default={"maximumRedeliveries": "5"})])
    b = await make_broker(cfg)
    p = await connect(b)
    await p.send("queue://REJ", "x", persistent=True)
    c = await p.consumer("queue://REJ", ack_mode="individual")
    (await c.receive(5)).reject()
    await wait_until_async(lambda: b.queue_size("ActiveMQ.DLQ") == 1, "the copy in ActiveMQ.DLQ")
    assert b.queue_size("REJ") == 0
    assert await before_marker(p, "queue://REJ", c, ack=True) == []


@over(*ALL)
async def test_individual_dead_letter_strategy(make_broker, connect):
    cfg = BrokerConfig(persistent=False, policy_entries=[
        policy(queue=">", dead_letter_strategy=dlq_strategy(kind="individual", queue_prefix="DLQ.")),
        policy(topic=">", dead_letter_strategy=dlq_strategy(
            kind="individual", topic_prefix="TDLQ.", use_queue_for_topic_messages=True)),
    ])
    b = await make_broker(cfg)
    p = await connect(b)
    await p.send("queue://PAY", "x", persistent=True)
    c = await p.consumer("queue://PAY", ack_mode="individual")
    (await c.receive(5)).nack()
    sub = await p.consumer("topic://NEWS", ack_mode="individual")
    await p.send("topic://NEWS", "y", persistent=True)
    (await sub.receive(5)).nack()
    await wait_until_async(lambda: (b.queue_size("DLQ.PAY"), b.queue_size("TDLQ.NEWS")) == (1, 1),
                           "a copy in DLQ.PAY and in TDLQ.NEWS")
    assert b.queue_size("ActiveMQ.DLQ") == 0


@over(*ALL)
async def test_discarding_strategy_drops(make_broker, connect):
    cfg = BrokerConfig(persistent=False, policy_entries=[
        policy(queue="TMP.>", dead_letter_strategy=dlq_strategy(kind="discarding"))])
    b = await make_broker(cfg)
    p = await connect(b)
    await p.send("queue://TMP.X", "x", persistent=True)
    c = await p.consumer("queue://TMP.X", ack_mode="individual")
    (await c.receive(5)).nack()
    await wait_until_async(dead_lettered(b, "queue://TMP.X"), "the nack counted as dead-lettered")
    assert b.queue_size("ActiveMQ.DLQ") == 0 and b.queue_size("TMP.X") == 0


async def _past(ms: int) -> None:
    """Let a message's time to live run out (sleeping here is the scenario, not a wait
    for the broker: nothing is asserted about when the broker acts)."""
    await asyncio.sleep(ms / 1000)


@over(*ALL)
async def test_expired_messages_never_delivered_and_dead_lettered(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("queue://EXP", "late", persistent=True, ttl=30)
    await p.send("queue://EXP", "fresh", persistent=True)
    await _past(60)
    c = await p.consumer("queue://EXP")
    assert (await c.receive(5)).text == "fresh"
    dlq = await p.consumer("queue://ActiveMQ.DLQ")
    dead = await dlq.receive(5)
    assert dead.text == "late"
    assert original_expiration(dead) > 0
    assert expiration(dead) == 0
    assert b.destination_stats()["queue://EXP"]["expired"] == 1
    assert await before_marker(p, "queue://EXP", c) == []


@over(*ALL)
async def test_periodic_expiry_check_without_consumers(make_broker, connect):
    cfg = BrokerConfig(persistent=False, default_policy=policy(expire_messages_period=50))
    b = await make_broker(cfg)
    p = await connect(b)
    await p.send("queue://IDLE", "x", persistent=True, ttl=20)
    await wait_until_async(lambda: b.queue_size("ActiveMQ.DLQ") == 1, "the expired copy in the DLQ")
    assert b.queue_size("IDLE") == 0


@over(*ALL)
async def test_process_expired_false_drops(make_broker, connect):
    cfg = BrokerConfig(persistent=False, policy_entries=[
        policy(queue=">", dead_letter_strategy=dlq_strategy(process_expired=False))])
    b = await make_broker(cfg)
    p = await connect(b)
    await p.send("queue://E2", "x", persistent=True, ttl=10)
    await p.send("queue://E2", "marker", persistent=True)
    await _past(30)
    c = await p.consumer("queue://E2")
    assert (await c.receive(5)).text == "marker"  # the expired one, had it come, was first
    assert b.queue_size("ActiveMQ.DLQ") == 0
    assert b.destination_stats()["queue://E2"]["expired"] == 1
