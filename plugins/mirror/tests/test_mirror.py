"""A -> B mirroring between brokers on threads of this process (real sockets,
proton clients): messages, acknowledgements, destinations, durable
subscriptions, the address filter; dual mirror and a ring of three."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from mirrortools import mirror_element, receive, send
from relaymq.testing.waits import wait_until

COUNT = 300  # per destination; test_slow.py runs the 10,000


def connected(broker: Any, name: str) -> None:
    wait_until(lambda: broker.mirror_status(name).get("state") == "connected",
               f"mirror {name} connected", timeout=30)


def test_queues_topics_subscriptions_and_filter(brokers: Any) -> None:
    b = brokers()
    a = brokers(mirrors=[mirror_element(f"tcp://{b.address}", "B",
                                        **{"address-filter": "orders.,prices,!orders.internal"})])
    connected(a, "B")
    # durable subscribers on A, made before the sends (and mirrored as subscriptions)
    receive(a.url, "topic://prices", 0, container="c1", durable_name="s1", timeout=0.1)
    receive(a.url, "topic://prices", 0, container="c.2", durable_name="s.2", timeout=0.1)
    wait_until(lambda: b.has("durable://c1:s1") and b.has("durable://c.2:s.2"),
               "subscriptions mirrored")
    ids: dict[str, list[str]] = {}
    for dest in ("queue://orders.eu", "queue://orders.us", "topic://prices"):
        ids[dest] = [f"{dest}-{i}" for i in range(COUNT)]
        send(a.url, dest, [f"{dest} {i}" for i in range(COUNT)], ids=ids[dest],
             durable=(dest != "queue://orders.us"))
    send(a.url, "queue://orders.internal", ["secret"] * 10)
    send(a.url, "queue://other", ["not mirrored"] * 10)
    # consume half on A: queues, and one of the two subscriptions
    half = COUNT // 2
    taken_eu = receive(a.url, "queue://orders.eu", half)
    taken_us = receive(a.url, "queue://orders.us", half)
    taken_s1 = receive(a.url, "topic://prices", half, container="c1", durable_name="s1")
    assert len(taken_eu) == len(taken_us) == len(taken_s1) == half

    wait_until(lambda: (b.depth("queue://orders.eu"), b.depth("queue://orders.us"),
                        b.depth("durable://c1:s1"), b.depth("durable://c.2:s.2"))
               == (COUNT - half, COUNT - half, COUNT - half, COUNT), "B converged")
    assert not b.has("queue://orders.internal") and not b.has("queue://other")
    # B holds exactly the rest, by id
    rest_eu = receive(b.url, "queue://orders.eu", COUNT - half)
    assert b.depth("queue://orders.eu") == 0
    assert sorted(m.id for m in rest_eu) == sorted(set(ids["queue://orders.eu"])
                                                   - {m.id for m in taken_eu})
    rest_s1 = receive(b.url, "topic://prices", COUNT - half, container="c1", durable_name="s1")
    assert sorted(m.id for m in rest_s1) == sorted(set(ids["topic://prices"])
                                                   - {m.id for m in taken_s1})
    # deleting on A deletes on B
    a.run(a.broker.management.delete_destination("queue://orders.us"))
    a.run(a.broker.management.delete_durable_subscription("c.2", "s.2"))
    wait_until(lambda: not b.has("queue://orders.us") and not b.has("durable://c.2:s.2"),
               "deletes mirrored")
    # the SnF queue empties once A has written the removal of the last event B accepted
    wait_until(lambda: a.mirror_status("B")["snf_depth"] == 0, "A's SnF queue empty")
    status = a.mirror_status("B")
    assert status["snf_depth"] == 0 and status["rejected"] == 0
    assert status["snf_queue"] == "$ACTIVEMQ_ARTEMIS_MIRROR_B"


@pytest.mark.parametrize("ring", [2, 3])
def test_dual_mirror_and_ring_stay_finite_and_converge(brokers: Any, ring: int) -> None:
    from mirrortools import free_port

    ports = [free_port() for _ in range(ring)]
    nodes = []
    for i in range(ring):
        nxt = ports[(i + 1) % ring]
        nodes.append(brokers(port=ports[i],
                             mirrors=[mirror_element(f"tcp://127.0.0.1:{nxt}", f"to{(i + 1) % ring}")]))
    for i, n in enumerate(nodes):
        connected(n, f"to{(i + 1) % ring}")
    # clients on every broker send to one queue
    for i, n in enumerate(nodes):
        send(n.url, "queue://shared", [f"from {i} #{k}" for k in range(40)])
    total = 40 * ring
    for n in nodes:
        wait_until(lambda n=n: n.depth("queue://shared") == total, "every message everywhere")
    # consume some on each broker: the acks go round too
    for n in nodes:
        assert len(receive(n.url, "queue://shared", 10)) == 10
    left = total - 10 * ring
    for n in nodes:
        wait_until(lambda n=n: n.depth("queue://shared") == left, "acks everywhere")
    # and it stays there: nothing circulates (each mirror's backlog is empty)
    for i, n in enumerate(nodes):
        wait_until(lambda n=n, i=i: n.mirror_status(f"to{(i + 1) % ring}")["snf_depth"] == 0,
                   "mirror idle")
    sent = [n.mirror_status(f"to{(i + 1) % ring}")["sent"] for i, n in enumerate(nodes)]
    assert all(n.depth("queue://shared") == left for n in nodes)
    # a message crosses each link at most once, an ack at most once per link
    assert all(s <= total + 10 * ring + 10 for s in sent), sent
    assert list(itertools.repeat(left, ring)) == [n.depth("queue://shared") for n in nodes]
