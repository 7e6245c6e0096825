"""Solace queue types in a real `relaymq run` process, reached with stomp.py and proton."""

from __future__ import annotations

import threading
import time
import zlib
from collections import defaultdict

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton.reactor import Selector  # noqa: E402
from proton.utils import BlockingConnection, LinkDetached  # noqa: E402
from relaymq.testing import wait_until  # noqa: E402

from .support import Broker, Client, broker_xml  # noqa: E402

CONFIG = broker_xml("solace", """
    <policyEntry queue="orders.>" queueType="partitioned" partitionCount="8"
                 partitionRebalanceDelay="300" partitionMaxHandoffTime="10000"
                 deadMessageQueue="orders.DMQ" maxRedelivery="2"/>
    <policyEntry queue="prices.>" queueType="lastValue"/>
    <policyEntry queue="audit.>" accessType="exclusive"/>
    <policyEntry queue="ttl.on.>" deadMessageQueue="ttl.DMQ"/>
    <policyEntry queue="ttl.off.>" respectTtl="false" deadMessageQueue="ttl.DMQ"/>
    <policyEntry queue="dmq.default.>" deadMessageQueue="ttl.DMQ" dmqEligible="true"/>
    <policyEntry queue="nodmq.>" deadMessageQueue="missing.DMQ" dmqEligible="true"/>
    <policyEntry queue="lost.>" deadMessageQueue="lost-consumers.DMQ" maxRedelivery="1"
                 dmqEligible="true"/>""",
                    extra='<destinations><queue physicalName="orders.DMQ"/>'
                          '<queue physicalName="ttl.DMQ"/>'
                          '<queue physicalName="lost-consumers.DMQ"/></destinations>')


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = Broker(tmp_path_factory.mktemp("solace"), CONFIG)
    b.start()
    yield b
    b.stop()


# ---------------------------------------------------------------------------
# Partitioned queues
# ---------------------------------------------------------------------------


def test_partitioned_queue_keeps_per_key_order_while_consumers_come_and_go(broker) -> None:
    keys = [f"k{i}" for i in range(24)]
    per_key = 60
    events: list[tuple[float, str, str, str, int]] = []  # (time, what, consumer, key, seq)
    lock = threading.Lock()

    def acking(delay: float):  # type: ignore[no-untyped-def]
        def on_msg(client: Client, frame) -> None:
            key, seq = frame.headers["key"], int(frame.headers["seq"])  # JMSXGroupID is not echoed
            with lock:
                events.append((time.monotonic(), "recv", client.name, key, seq))
            if delay:
                time.sleep(delay)
            with lock:
                events.append((time.monotonic(), "ack", client.name, key, seq))
            client.conn.ack(frame.headers["ack"])
        return on_msg

    def consumer(name: str, delay: float = 0.0) -> Client:
        c = Client(broker, name)
        c.on_msg = acking(delay)
        c.conn.subscribe("/queue/orders.book", id="1", ack="client-individual",
                         headers={"activemq.prefetchSize": "5"})
        return c

    producer = Client(broker, "producer")
    consumers = [consumer("a", 0.002), consumer("b"), consumer("c")]
    leaving_at: dict[str, float] = {}
    for seq in range(per_key):
        for key in keys:
            producer.conn.send("/queue/orders.book", f"{key}:{seq}",
                               headers={"JMSXGroupID": key, "key": key, "seq": str(seq),
                                        "persistent": "true"})
        if seq == 15:
            consumers.append(consumer("d"))  # joins under load
        if seq == 35:
            leaving = consumers.pop(1)
            leaving_at[leaving.name] = time.monotonic()
            leaving.conn.disconnect()  # leaves holding what it had not acked
            with lock:
                events.append((time.monotonic(), "gone", leaving.name, "", -1))
    producer.send("/queue/orders.book.done", "flush")  # every SEND above is processed

    def all_acked() -> bool:
        with lock:
            acked = {(k, s) for _, what, _, k, s in events if what == "ack"}
        return len(acked) == len(keys) * per_key

    wait_until(all_acked, "every message acknowledged", 60)
    for c in consumers + [producer]:
        assert not c.errors, [(e.headers, e.body) for e in c.errors[:2]]
        c.close()

    with lock:
        timeline = sorted(events)
    gone_at = {c: t for t, what, c, _, _ in timeline if what == "gone"}
    gone = set(gone_at)
    by_key: dict[str, list[tuple[float, str, str, int]]] = defaultdict(list)
    for t, what, c, k, s in timeline:
        # what a consumer's thread records after it disconnected came late: the broker
        # had delivered it before, and returned it when the consumer left (its ACKs,
        # written after the DISCONNECT, never arrived)
        if k and not (c in gone_at and t >= gone_at[c]):
            by_key[k].append((t, what, c, s))
    for key, evs in by_key.items():
        # in order: the acknowledged sequence of every key is strictly increasing
        acked = [s for _, what, _, s in evs if what == "ack"]
        firsts = [s for i, s in enumerate(acked) if s not in acked[:i]]
        assert firsts == list(range(per_key)), (key, acked)
        # never on two consumers at once: when a key moves from one consumer to another,
        # the first had acknowledged everything of it it received (or had left)
        holder, open_ = None, set()
        for _t, what, c, s in evs:
            if what == "recv":
                if holder is not None and c != holder:
                    assert not open_ or holder in gone, \
                        f"{key}:{s} went to {c} while {holder} held {sorted(open_)}"
                    open_ = set()
                holder = c
                open_.add(s)
            elif c == holder:
                open_.discard(s)
    used = {c for _, what, c, _, _ in timeline if what == "ack"}
    assert {"a", "c", "d"} <= used  # the partitions were spread, the newcomer got some


def test_amqp_group_id_is_the_partition_key_and_hand_off_waits_for_a_slow_consumer(broker) -> None:
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}")
    sender = conn.create_sender("queue://orders.handoff")

    def send(first: int, last: int) -> None:
        for i in range(first, last):
            sender.send(proton.Message(body=f"m{i}", group_id=f"g{i % 4}",
                                       properties={"seq": i}, durable=True))

    slow = Client(broker, "slow")
    slow.conn.subscribe("/queue/orders.handoff", id="1", ack="client-individual",
                        headers={"activemq.prefetchSize": "100"})
    try:
        send(0, 40)
        slow.wait(40)  # owns every partition, holds everything, acknowledges nothing
        fast = Client(broker, "fast")
        fast.conn.subscribe("/queue/orders.handoff", id="1", ack="client-individual",
                            headers={"activemq.prefetchSize": "100"})
        # past the rebalance delay (300 ms) half the partitions move to `fast`, but their
        # messages wait for the hand-off: `slow` still holds messages of every key
        wait_until(lambda: "rebalanced 8 partitions over 2 consumers (4 moving)"
                   in broker.output(), "the rebalance", 10)
        send(40, 80)
        # the barrier: a message of a partition `slow` keeps (the rebalance keeps the
        # first four where they are) is dispatched after everything sent before it
        marker_key = next(k for k in (f"marker{i}" for i in range(100))
                          if zlib.crc32(k.encode()) % 8 < 4)
        sender.send(proton.Message(body="marker", group_id=marker_key, durable=True))
        slow.wait_for("marker")
        assert fast.messages == []  # the moving partitions wait for their hand-off
        acked = len(slow.messages)  # the 40 it held and what came since of its own keys
        for m in slow.messages[:acked]:
            slow.conn.ack(m.headers["ack"])
        wait_until(lambda: len(slow.messages) + len(fast.messages) >= 81, "all 81", 20)
        for m in slow.messages[acked:]:
            slow.conn.ack(m.headers["ack"])
        for m in fast.messages:
            fast.conn.ack(m.headers["ack"])
        assert fast.messages, "the newcomer got no partition"
        keyed = [m for m in slow.messages[40:] if m.body != "marker"]
        keys_fast = {int(m.body[1:]) % 4 for m in fast.messages}
        keys_slow_after = {int(m.body[1:]) % 4 for m in keyed}
        assert not keys_fast & keys_slow_after  # a key is on one consumer after the move
        for c in (slow, fast):
            seqs = [int(m.body[1:]) for m in c.messages if m.body != "marker"]
            for key in range(4):
                mine = [s for s in seqs if s % 4 == key]
                assert mine == sorted(mine), (c.name, key, mine)
        assert not slow.errors and not fast.errors, [(e.headers, e.body) for e in slow.errors + fast.errors]
        fast.close()
    finally:
        slow.close()
        conn.close()


def test_browsing_and_selectors_are_refused_on_a_partitioned_queue(broker) -> None:
    c = Client(broker)
    c.conn.subscribe("/queue/orders.refused", id="1", headers={"browser": "true"})
    wait_until(lambda: c.errors, "an ERROR frame", 10)
    assert "partitioned queue: browsing is not allowed" in c.errors[0].headers["message"]
    c2 = Client(broker)
    c2.conn.subscribe("/queue/orders.refused", id="1", headers={"selector": "a = 1"})
    wait_until(lambda: c2.errors, "an ERROR frame", 10)
    assert "a selector is not allowed" in c2.errors[0].headers["message"]
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}")
    try:
        with pytest.raises(LinkDetached, match="a selector is not allowed"):
            conn.create_receiver("queue://orders.refused", options=Selector("a = 1"))
    finally:
        conn.close()
    c.close()
    c2.close()


def test_max_redelivery_then_the_dead_message_queue(broker) -> None:
    c = Client(broker)
    c.send("/queue/orders.poison", "bad", JMSXGroupID="x", persistent="true",
           JMS_Solace_DeadMsgQueueEligible="true")
    c.send("/queue/orders.poison", "bad, not eligible", JMSXGroupID="x", persistent="true")
    c.conn.subscribe("/queue/orders.poison", id="1", ack="client-individual")
    for n in range(1, 7):  # maxRedelivery 2: delivered 3 times each, then gone
        c.wait(n)
        c.conn.nack(c.messages[n - 1].headers["ack"])
    # the barrier: a message of the same key comes after any further redelivery
    c.send("/queue/orders.poison", "marker", JMSXGroupID="x", persistent="true")
    got = c.wait_for("marker")
    assert sorted(got[:-1]) == ["bad"] * 3 + ["bad, not eligible"] * 3 and len(got) == 7
    c.ack(c.messages[-1])
    c.conn.unsubscribe("1")
    c.subscribe("/queue/orders.DMQ", id="2", ack="auto")
    assert c.wait(8)[7] == "bad"
    c.send("/queue/orders.DMQ", "dmq marker")
    # the ineligible one was discarded, not dead-lettered
    assert c.wait_for("dmq marker")[7:] == ["bad", "dmq marker"]
    c.close()


def test_a_message_dead_lettered_by_a_nack_makes_room_for_the_next(broker) -> None:
    """Prefetch 1: once maxRedelivery is used up and the message goes to the DMQ,
    the consumer gets the next message at once, not at the next send."""
    c = Client(broker)
    for body in ("a", "b"):
        c.send("/queue/orders.pf1", body, JMSXGroupID="k", persistent="true",
               JMS_Solace_DeadMsgQueueEligible="true")
    c.conn.subscribe("/queue/orders.pf1", id="1", ack="client-individual",
                     headers={"activemq.prefetchSize": "1"})
    for n in range(1, 7):  # maxRedelivery 2: each delivered 3 times
        c.wait(n)
        c.conn.nack(c.messages[n - 1].headers["ack"])
    assert c.wait(6) == ["a"] * 3 + ["b"] * 3
    c.close()


def test_deliveries_lost_with_a_consumer_count_against_max_redelivery(broker) -> None:
    """A consumer that leaves holding a message is a failed delivery (ActiveMQ and
    Solace count the redelivery): with maxRedelivery 1, the second consumer that
    disconnects without acknowledging it sends it to the dead message queue."""
    producer = Client(broker, "p")
    producer.send("/queue/lost.q", "poison", persistent="true")
    for n in range(2):  # delivered, then redelivered once; never acknowledged
        c = Client(broker, f"c{n}")
        c.subscribe("/queue/lost.q", id="1", ack="client-individual")
        assert c.wait(1) == ["poison"]
        assert c.messages[0].headers.get("redelivered", "false") == ("true" if n else "false")
        c.close()  # disconnects holding it
    dmq = Client(broker, "dmq")
    dmq.subscribe("/queue/lost-consumers.DMQ", id="1")
    assert dmq.wait(1) == ["poison"]
    last = Client(broker, "last")
    last.subscribe("/queue/lost.q", id="1")
    producer.send("/queue/lost.q", "marker")
    assert last.wait_for("marker") == ["marker"]  # it is not delivered a third time
    for c in (producer, dmq, last):
        c.close()


# ---------------------------------------------------------------------------
# Exclusive access, last value queues, TTL and DMQ eligibility
# ---------------------------------------------------------------------------


def test_exclusive_queue_fails_over_in_bind_order(broker) -> None:
    clients = [Client(broker, n) for n in ("first", "second", "third")]
    for c in clients:  # bound in this order (each SUBSCRIBE is receipted)
        c.subscribe("/queue/audit.log", id="1", ack="client-individual")
    producer = Client(broker, "p")
    for i in range(5):
        producer.send("/queue/audit.log", f"m{i}")
    assert clients[0].wait(5) == [f"m{i}" for i in range(5)]
    clients[0].conn.ack(clients[0].messages[0].headers["ack"])  # m0 done, m1..m4 held
    clients[0].close()
    assert clients[1].wait(4) == [f"m{i}" for i in range(1, 5)]  # in order, redelivered
    assert all(m.headers.get("redelivered") == "true" for m in clients[1].messages)
    producer.send("/queue/audit.log", "barrier")  # to the active one, after all the rest
    assert clients[1].wait_for("barrier")[-1] == "barrier"
    assert clients[2].messages == []  # standing by
    for m in clients[1].messages:
        clients[1].conn.ack(m.headers["ack"])
    assert not clients[1].errors, clients[1].errors[0].headers
    clients[1].close()
    producer.send("/queue/audit.log", "m5")
    assert clients[2].wait(1) == ["m5"]
    clients[2].close()
    producer.close()


def test_a_higher_priority_consumer_stands_by_until_the_active_one_leaves(broker) -> None:
    """Exclusive access keeps the order: a consumer that binds with a higher
    priority (activemq.priority) does not take over while the active consumer is
    bound; when that one leaves, the newcomer gets what it had not acknowledged
    first, redelivered, in order."""
    first = Client(broker, "first")
    first.subscribe("/queue/audit.priority", id="1", ack="client-individual")
    producer = Client(broker, "p")
    for i in range(3):
        producer.send("/queue/audit.priority", f"m{i}")
    assert first.wait(3) == ["m0", "m1", "m2"]  # held, not acknowledged
    urgent = Client(broker, "urgent")
    urgent.subscribe("/queue/audit.priority", id="1", ack="client-individual",
                     **{"activemq.priority": "9"})
    producer.send("/queue/audit.priority", "m3")
    assert first.wait_for("m3") == ["m0", "m1", "m2", "m3"]  # still the active consumer
    assert urgent.messages == []  # so every message so far went to `first`
    first.ack(first.messages[0])
    first.close()  # m1..m3 unacknowledged
    assert urgent.wait(3) == ["m1", "m2", "m3"]
    assert all(m.headers.get("redelivered") == "true" for m in urgent.messages)
    producer.send("/queue/audit.priority", "m4")
    assert urgent.wait_for("m4") == ["m1", "m2", "m3", "m4"]
    assert not first.errors and not urgent.errors
    urgent.close()
    producer.close()


def test_last_value_queue_keeps_only_the_newest_and_browsing_keeps_it(broker) -> None:
    c = Client(broker)
    for i in range(5):
        c.send("/queue/prices.ibm", f"IBM={i}", persistent="true")
    c.conn.subscribe("/queue/prices.ibm", id="b", headers={"browser": "true"})
    wait_until(lambda: c.browse_ends, "the end of the browse", 10)
    assert c.bodies() == ["IBM=4"]
    c.conn.subscribe("/queue/prices.ibm", id="1", ack="auto")
    assert c.wait(2) == ["IBM=4", "IBM=4"]  # browsed, then consumed
    c.conn.subscribe("/queue/prices.ibm.sel", id="s", headers={"selector": "x = 1"})
    wait_until(lambda: c.errors, "an ERROR frame", 10)
    assert "lastValue queue: a selector is not allowed" in c.errors[0].headers["message"]
    c.close()


@pytest.mark.parametrize("returned_by", ["release", "detach"])
def test_a_returned_last_value_is_replaced_by_the_newer_one(broker, returned_by) -> None:
    """A consumer holds A, B arrives and waits, the consumer gives A back (releases
    it, or its link closes): A is no longer the last value, so it is replaced
    instead of going back beside B."""
    address = f"queue://prices.returned.{returned_by}"
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}")
    try:
        sender = conn.create_sender(address)
        # no credit window: each receive() grants one, so nothing is prefetched
        holder = conn.create_receiver(address, credit=0, name="holder")
        sender.send(proton.Message(body="A", durable=True))
        assert holder.receive(timeout=10).body == "A"  # held, unsettled; no credit left
        sender.send(proton.Message(body="B", durable=True))  # waits: the newest value
        if returned_by == "release":
            holder.release(delivered=False)  # A goes back
        else:
            holder.close()  # returns A when the broker answers the detach
        reader = conn.create_receiver(address, credit=10, name="reader")  # after the return
        assert reader.receive(timeout=10).body == "B"
        sender.send(proton.Message(body="marker"))
        assert reader.receive(timeout=10).body == "marker"  # nothing between
        reader.accept()
    finally:
        conn.close()


def test_ttl_is_respected_or_not_and_the_dmq_takes_only_eligible_messages(broker) -> None:
    c = Client(broker)
    past = str(int(time.time() * 1000) - 1000)
    c.send("/queue/ttl.on.q", "expired, eligible", expires=past, persistent="true",
           JMS_Solace_DeadMsgQueueEligible="true")
    c.send("/queue/ttl.on.q", "expired, not eligible", expires=past, persistent="true")
    c.send("/queue/ttl.on.q", "alive", persistent="true")
    c.send("/queue/ttl.off.q", "expired but kept", expires=past, persistent="true")
    c.send("/queue/ttl.on.q", "marker on")
    c.send("/queue/ttl.off.q", "marker off")
    c.subscribe("/queue/ttl.on.q", id="1", ack="auto")
    c.subscribe("/queue/ttl.off.q", id="2", ack="auto")
    wait_until(lambda: {"marker on", "marker off"} <= set(c.bodies()), "both markers", 20)
    assert c.bodies_of("1") == ["alive", "marker on"]
    assert c.bodies_of("2") == ["expired but kept", "marker off"]
    c.subscribe("/queue/ttl.DMQ", id="3", ack="auto")
    c.wait(5)
    c.send("/queue/ttl.DMQ", "dmq marker")
    c.wait_for("dmq marker")
    assert c.bodies_of("3") == ["expired, eligible", "dmq marker"]
    c.close()


def test_a_per_queue_default_makes_messages_eligible_and_a_missing_dmq_discards(broker) -> None:
    c = Client(broker)
    past = str(int(time.time() * 1000) - 1000)
    c.send("/queue/dmq.default.q", "eligible by default", expires=past, persistent="true")
    c.send("/queue/nodmq.q", "nowhere to go", expires=past, persistent="true")
    c.subscribe("/queue/dmq.default.q", id="1", ack="auto")
    c.subscribe("/queue/nodmq.q", id="2", ack="auto")
    c.subscribe("/queue/ttl.DMQ", id="3", ack="auto")
    assert c.wait(1) == ["eligible by default"]
    c.subscribe("/queue/missing.DMQ", id="4", ack="auto")
    c.send("/queue/missing.DMQ", "marker")
    c.wait_for("marker")
    assert c.bodies_of("4") == ["marker"]  # the expired message did not go there
    c.send("/queue/nodmq.q", "nodmq marker")  # behind the expired one, had it stayed
    c.wait_for("nodmq marker")
    assert c.bodies_of("2") == ["nodmq marker"]  # discarded, not delivered
    c.close()


def test_a_persistent_last_value_survives_a_restart(tmp_path) -> None:
    b = Broker(tmp_path, CONFIG)
    b.start()
    try:
        c = Client(b)
        for i in range(3):
            c.send("/queue/prices.msft", f"MSFT={i}", persistent="true")
        c.close()
    finally:
        b.stop()
    b.start()
    try:
        c = Client(b)
        c.conn.subscribe("/queue/prices.msft", id="1", ack="auto")
        assert c.wait(1) == ["MSFT=2"]
        c.send("/queue/prices.msft", "marker")
        assert c.wait_for("marker") == ["MSFT=2", "marker"]
        c.close()
    finally:
        b.stop()
