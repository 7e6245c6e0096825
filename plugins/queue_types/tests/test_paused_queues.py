"""A paused `exclusive` or `partitioned` queue delivers nothing to anyone until it is
resumed, and the consumers bound to it keep their places meanwhile: when the active
one leaves during the pause the next standby takes its turn, and a consumer that
binds during the pause stands by behind them; a partition whose consumer leaves
during the pause goes to one still bound. The broker runs in this process (pause
and resume are management calls), reached with stomp.py over real sockets."""

from __future__ import annotations

import zlib

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")

from relaymq.testing import wait_until  # noqa: E402

from .support import Client, EmbeddedBroker, broker_xml  # noqa: E402

CONFIG = broker_xml("excl-paused", """
    <policyEntry queue="held.>" accessType="exclusive"/>
    <policyEntry queue="keyed.>" partitionCount="2" partitionRebalanceDelay="100"/>""")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = EmbeddedBroker(tmp_path_factory.mktemp("excl-paused"), CONFIG)
    b.start()
    yield b
    b.stop()


def active(b: EmbeddedBroker, queue: str) -> dict[str, bool]:
    """Management's active flag of each consumer on `queue`, by client id."""
    return {c.client_id: c.active for c in b.call(lambda br: br.management.consumers(queue))}


def nothing_more(clients: list[Client], marker: str) -> None:
    """Send `marker` to a plain queue each client also consumes (subscription "m")
    and wait for it: whatever the paused queue had handed them would have come first."""
    for c in clients:
        c.send(f"/queue/plain.{c.name}", marker)
        c.wait_for(marker)


def test_a_consumer_bound_during_a_pause_stands_by_behind_the_bound_ones(broker) -> None:
    queue = "/queue/held.q"
    first, second, late = (Client(broker, n, client_id=n) for n in ("first", "second", "late"))
    for c in (first, second):
        c.subscribe(queue, id="1", ack="client-individual")
        c.subscribe(f"/queue/plain.{c.name}", id="m")
    first.send(queue, "m0")
    assert first.wait(1) == ["m0"]
    broker.call(lambda br: br.management.pause("held.q"))
    first.close()  # m0 goes back; "second" is the next in bind order
    late.subscribe(queue, id="1", ack="client-individual")
    late.subscribe("/queue/plain.late", id="m")
    late.send(queue, "m1")
    nothing_more([second, late], "paused")
    assert second.bodies_of("1") == [] and late.bodies_of("1") == []  # paused: nothing
    assert active(broker, "held.q") == {"second": False, "late": False}
    broker.call(lambda br: br.management.resume("held.q"))
    wait = second.wait(3)  # the marker, then m0 (redelivered) and m1, in order
    assert wait[1:] == ["m0", "m1"]
    assert second.messages[1].headers.get("redelivered") == "true"
    assert active(broker, "held.q") == {"second": True, "late": False}
    late.send(queue, "m2")
    assert second.wait(4)[3] == "m2"
    nothing_more([late], "resumed")
    assert late.bodies_of("1") == []  # it stands by while "second" is bound
    for c in (second, late):
        c.close()


def test_the_first_consumer_bound_to_a_paused_exclusive_queue_waits_for_the_resume(
        broker) -> None:
    queue = "/queue/held.empty"
    p = Client(broker, "p")
    p.send(queue, "waiting")
    broker.call(lambda br: br.management.pause("held.empty"))
    c = Client(broker, "only", client_id="only")
    c.subscribe(queue, id="1")
    c.subscribe("/queue/plain.only", id="m")
    nothing_more([c], "paused")
    assert c.bodies_of("1") == []
    assert active(broker, "held.empty") == {"only": False}
    broker.call(lambda br: br.management.resume("held.empty"))
    c.wait_for("waiting")
    assert c.bodies_of("1") == ["waiting"]
    assert active(broker, "held.empty") == {"only": True}
    for x in (c, p):
        x.close()


def partitions(b: EmbeddedBroker, queue: str) -> dict[str, tuple[int, ...] | None]:
    return {c.client_id: c.partitions for c in b.call(lambda br: br.management.consumers(queue))}


def test_a_partition_whose_consumer_leaves_during_a_pause_goes_to_a_bound_one(broker) -> None:
    """Two consumers own a partition each; the queue is paused and one leaves: its
    partition goes to the other, which receives every key once the queue resumes."""
    queue = "/queue/keyed.paused"
    keys = [f"k{i}" for i in range(8)]
    assert len({zlib.crc32(k.encode()) % 2 for k in keys}) == 2  # both partitions
    one, two = (Client(broker, n, client_id=n) for n in ("one", "two"))
    for c in (one, two):
        c.subscribe(queue, id="1")
        c.subscribe(f"/queue/plain.{c.name}", id="m")
    wait_until(lambda: partitions(broker, "keyed.paused") == {"one": (0,), "two": (1,)}
               or partitions(broker, "keyed.paused") == {"one": (1,), "two": (0,)},
               "a partition each")
    broker.call(lambda br: br.management.pause("keyed.paused"))
    one.close()
    for k in keys:
        two.send(queue, k, JMSXGroupID=k)
    nothing_more([two], "paused")
    assert two.bodies_of("1") == []
    assert partitions(broker, "keyed.paused") == {"two": (0, 1)}
    broker.call(lambda br: br.management.resume("keyed.paused"))
    wait_until(lambda: len(two.bodies_of("1")) == len(keys), "every key at two")
    assert two.bodies_of("1") == keys
    two.close()
