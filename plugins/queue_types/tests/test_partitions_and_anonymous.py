"""Partition count changes (configuration reload), per-partition last value queues
and anonymous queues, in a `relaymq run` process over STOMP and AMQP."""

from __future__ import annotations

import zlib

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton.reactor import Container, DynamicNodeProperties  # noqa: E402
from proton.utils import BlockingConnection  # noqa: E402
from relaymq.testing import wait_until  # noqa: E402

from .support import Broker, Client, broker_xml  # noqa: E402

CONFIG = broker_xml("parts", """
    <policyEntry queue="orders.>" partitionCount="{count}" partitionRebalanceDelay="100"/>
    <policyEntry queue="last.>" queueType="lastValue" partitionCount="4"/>
    <policyEntry tempQueue="true" queueType="anonymous" anonymousQueueGrace="{grace}"/>""")


def config(count: int = 4, grace: int = 60000) -> str:
    return CONFIG.replace("{count}", str(count)).replace("{grace}", str(grace))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = Broker(tmp_path_factory.mktemp("parts"), config())
    b.start()
    yield b
    b.stop()


# ---------------------------------------------------------------------------
# Changing the partition count
# ---------------------------------------------------------------------------


def test_changing_the_partition_count_unbinds_consumers_and_loses_nothing(broker) -> None:
    c = Client(broker, "holder")
    c.subscribe("/queue/orders.scale", id="1", ack="client-individual",
                **{"activemq.prefetchSize": "5"})
    p = Client(broker, "p")
    for i in range(40):
        p.send("/queue/orders.scale", f"{i % 8}:{i}", JMSXGroupID=f"k{i % 8}",
               persistent="true")
    c.wait(5)  # holds five, acknowledges nothing
    broker.reload(config(count=6), "partition count changed from 4 to 6")
    assert "partition count changed from 4 to 6" in c.wait_error()
    assert "1 consumers unbound" in broker.output()
    # bind again: two consumers share the six partitions; every message comes, each key in order
    a, b = Client(broker, "a"), Client(broker, "b")
    a.subscribe("/queue/orders.scale", id="1")
    b.subscribe("/queue/orders.scale", id="1")
    wait_until(lambda: len(a.messages) + len(b.messages) >= 40, "all 40", 20)
    got = a.bodies() + b.bodies()
    assert sorted(got, key=lambda s: int(s.split(":")[1])) == [f"{i % 8}:{i}" for i in range(40)]
    for consumer in (a, b):
        for key in range(8):
            seqs = [int(s.split(":")[1]) for s in consumer.bodies() if s.startswith(f"{key}:")]
            assert seqs == sorted(seqs), (consumer.name, key, seqs)
    broker.reload(config(count=4), "partition count changed from 6 to 4")
    a.wait_error()
    b.wait_error()
    for x in (p, a, b):
        x.close()


def test_a_reload_to_partition_count_0_makes_a_plain_queue_and_back(tmp_path) -> None:
    broker = Broker(tmp_path, config())
    broker.start()
    try:
        c = Client(broker, "holder")
        c.subscribe("/queue/orders.zero", id="1", ack="client-individual",
                    **{"activemq.prefetchSize": "5"})
        p = Client(broker, "p")
        sent = [f"{i % 4}:{i}" for i in range(20)]
        for i, body in enumerate(sent):
            p.send("/queue/orders.zero", body, JMSXGroupID=f"k{i % 4}", persistent="true")
        c.wait(5)  # holds five, acknowledges nothing
        broker.reload(config(count=0), "partition count changed from 4 to 0")
        assert "partition count changed from 4 to 0" in c.wait_error()
        assert "no longer partitioned; 20 waiting messages keep the queue's order" \
            in broker.output()
        # a plain queue now: browsing is allowed and shows the queue's order
        viewer = Client(broker, "viewer")
        viewer.subscribe("/queue/orders.zero", id="b", browser="true")
        wait_until(lambda: viewer.browse_ends, "the end of the browse", 10)
        assert viewer.bodies() == sent
        # one consumer gets every waiting message in the queue's order, the five that
        # were held first, redelivered
        d = Client(broker, "d")
        d.subscribe("/queue/orders.zero", id="1", ack="client-individual")
        assert d.wait(20) == sent
        assert [m.headers.get("redelivered") for m in d.messages[:6]] == ["true"] * 5 + [None]
        # partitioned again by the next reload (consumers unbound, browsing refused)
        broker.reload(config(count=4), "partition count changed from 0 to 4")
        assert "partition count changed from 0 to 4" in d.wait_error()
        again = Client(broker, "again")
        again.subscribe("/queue/orders.zero", id="b", browser="true")
        assert "browsing is not allowed" in again.wait_error()
        for x in (p, viewer):
            x.close()
    finally:
        broker.stop()


# ---------------------------------------------------------------------------
# Per-partition last value queues
# ---------------------------------------------------------------------------


def test_a_partitioned_last_value_queue_keeps_the_last_message_of_each_partition(broker) -> None:
    p = Client(broker, "p")
    keys = [f"key{i}" for i in range(10)]
    last: dict[int, str] = {}
    for round_ in range(3):
        for key in keys:
            body = f"{key}={round_}"
            p.send("/queue/last.prices", body, JMSXGroupID=key, persistent="true")
            last[zlib.crc32(key.encode()) % 4] = body
    conn = BlockingConnection(f"127.0.0.1:{broker.amqp_port}")
    try:  # over AMQP the key is properties.group-id
        conn.create_sender("queue://last.prices").send(
            proton.Message(body="amqp=last", group_id="key3", durable=True))
        last[zlib.crc32(b"key3") % 4] = "amqp=last"
    finally:
        conn.close()
    c = Client(broker, "c")
    c.subscribe("/queue/last.prices", id="1")
    got = c.wait(len(last))
    assert sorted(got) == sorted(last.values())
    p.send("/queue/last.prices", "marker", JMSXGroupID="key0", persistent="true")
    assert c.wait_for("marker")[len(last):] == ["marker"]  # nothing else was kept
    c.close()
    p.close()


# ---------------------------------------------------------------------------
# Anonymous queues
# ---------------------------------------------------------------------------


def _anonymous_queue(broker: Broker, owner: Client) -> str:
    """`owner` makes a temporary queue and binds to it; returns the name others use."""
    owner.subscribe("/temp-queue/replies", id="r")
    owner.send("/queue/anon.names", "where do I answer?", **{"reply-to": "/temp-queue/replies"})
    helper = Client(broker, "helper")
    helper.subscribe("/queue/anon.names", id="n")
    helper.wait(1)
    name = helper.messages[0].headers["reply-to"]
    helper.close()
    assert name.startswith("/remote-temp-queue/")
    return name


def test_an_anonymous_queue_waits_for_its_client_to_reconnect(broker) -> None:
    owner = Client(broker, "owner", client_id="requester-1")
    name = _anonymous_queue(broker, owner)
    owner.close()  # disconnects without unbinding first
    responder = Client(broker, "responder")
    responder.send(name, "answer while you were away")
    stranger = Client(broker, "stranger", client_id="someone-else")
    stranger.subscribe(name, id="x")
    assert "belongs to a connection that is closed" in stranger.wait_error()
    back = Client(broker, "back", client_id="requester-1")
    back.subscribe(name, id="r")
    assert back.wait(1) == ["answer while you were away"]
    assert "came back and took it over" in broker.output()
    responder.send(name, "and after")
    assert back.wait(2)[1] == "and after"
    back.close()
    responder.close()


USERS = """<plugins><simpleAuthenticationPlugin anonymousAccessAllowed="false"><users>
  <authenticationUser username="alice" password="alice-pw" groups="apps"/>
  <authenticationUser username="mallory" password="mallory-pw" groups="apps"/>
</users></simpleAuthenticationPlugin></plugins>"""


def test_another_user_with_the_client_id_cannot_take_an_anonymous_queue(tmp_path) -> None:
    b = Broker(tmp_path, broker_xml("users", """
    <policyEntry tempQueue="true" queueType="anonymous" anonymousQueueGrace="30000"/>""",
                                    extra=USERS))
    b.start()
    alice, mallory = ("alice", "alice-pw"), ("mallory", "mallory-pw")
    try:
        owner = Client(b, "owner", client_id="alice-app", login=alice)
        owner.subscribe("/temp-queue/replies", id="r")
        owner.send("/queue/anon.names", "?", **{"reply-to": "/temp-queue/replies"})
        helper = Client(b, "helper", login=mallory)
        helper.subscribe("/queue/anon.names", id="n")
        name = helper.wait(1) and helper.messages[0].headers["reply-to"]
        owner.close()
        helper.send(name, "for alice only")
        thief = Client(b, "thief", client_id="alice-app", login=mallory)
        thief.subscribe(name, id="x")
        assert "belongs to a connection that is closed" in thief.wait_error()
        assert thief.messages == []
        thief.close()
        back = Client(b, "back", client_id="alice-app", login=alice)
        back.subscribe(name, id="r")
        assert back.wait(1) == ["for alice only"]
        back.close()
        helper.close()
    finally:
        b.stop()


def test_unbinding_removes_an_anonymous_queue(broker) -> None:
    owner = Client(broker, "owner", client_id="requester-2")
    name = _anonymous_queue(broker, owner)
    owner.conn.unsubscribe("r")
    wait_until(lambda: "its client unbound; removed" in broker.output(), "the removal", 10)
    owner.subscribe(name, id="again")
    assert "does not exist" in owner.wait_error()
    owner.close()


def test_an_anonymous_queue_is_removed_when_its_client_does_not_come_back(tmp_path) -> None:
    b = Broker(tmp_path, config(grace=500))
    b.start()
    try:
        owner = Client(b, "owner", client_id="requester-3")
        name = _anonymous_queue(b, owner)
        owner.close()
        responder = Client(b, "responder")
        responder.send(name, "nobody will read this")
        wait_until(lambda: "did not come back; removed" in b.output(), "the removal", 20)
        back = Client(b, "late", client_id="requester-3")
        back.subscribe(name, id="r")
        assert "does not exist" in back.wait_error()
        back.close()
        responder.close()
    finally:
        b.stop()


def test_an_amqp_client_gets_its_anonymous_queue_back(broker) -> None:
    def connect() -> BlockingConnection:
        container = Container()
        container.container_id = "amqp-requester"
        return BlockingConnection(f"127.0.0.1:{broker.amqp_port}", container=container)

    conn = connect()
    receiver = conn.create_receiver(None, dynamic=True,
                                    options=DynamicNodeProperties({"x-opt-temp": True}))
    address = receiver.link.remote_source.address
    assert address.startswith("temp-queue://")
    conn.close()
    sender = BlockingConnection(f"127.0.0.1:{broker.amqp_port}")
    try:
        sender.create_sender(address).send(proton.Message(body="kept for you"))
    finally:
        sender.close()
    conn = connect()
    try:
        receiver = conn.create_receiver(address)
        msg = receiver.receive(timeout=10)
        receiver.accept()
        assert msg.body == "kept for you"
    finally:
        conn.close()
