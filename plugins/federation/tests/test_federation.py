"""Address and queue federation between `relaymq run` brokers: demand,
teardown, rings and meshes with max-hops, local preference for queues."""

from __future__ import annotations

import pytest
from fedtools import (
    Advisories,
    Brokers,
    before_marker,
    client,
    connection_xml,
    receive_all,
    send,
    until_markers,
)
from relaymq.testing import wait_until


def address_federation(max_hops: int = 0, match: str = "news.#", idle_ms: int = 500) -> str:
    return (f'<federation><local-address-policy name="news" max-hops="{max_hops}">'
            f'<include address-match="{match}"/><exclude address-match="news.internal.#"/>'
            f'</local-address-policy><property key="addressReceiverIdleTimeout" value="{idle_ms}"/>'
            '</federation>')


def test_demand_creates_the_receiver_and_its_end_removes_it(brokers: Brokers) -> None:
    brokers.start("a")
    brokers.start("b", connection_xml("a", brokers.port("a"), address_federation()))
    watch_a = Advisories(brokers.url("a"), "Topic", "news.eu")
    try:
        with client(brokers.url("b")) as cb:
            sub = cb.create_receiver("topic://news.eu", credit=100)
            assert watch_a.wait(lambda n: n == 1) == 1  # B's receiver subscribed on A
            send(brokers.url("a"), "topic://news.eu", [f"n{i}" for i in range(10)])
            assert receive_all(sub, 10) == [f"n{i}" for i in range(10)]
            send(brokers.url("a"), "topic://news.eu", ["end"])  # behind them on the same link
            assert before_marker(sub, "end") == []  # nothing twice
            sub.close()
            assert watch_a.wait(lambda n: n == 0) == 0  # gone after the idle timeout
            # B closed its receiver: A deleted the subscription behind it, so what is
            # published now is for nobody (it must not arrive on the next receiver)
            send(brokers.url("a"), "topic://news.eu", ["gone"])
            # demand again: a new receiver
            sub = cb.create_receiver("topic://news.eu", credit=100)
            assert watch_a.wait(lambda n: n == 1) == 1
            send(brokers.url("a"), "topic://news.eu", ["again"])
            assert receive_all(sub, 1) == ["again"]
    finally:
        watch_a.close()


def test_excluded_and_unmatched_addresses_are_not_federated(brokers: Brokers) -> None:
    brokers.start("a")
    brokers.start("b", connection_xml("a", brokers.port("a"), address_federation()))
    watch = Advisories(brokers.url("a"), "Topic", "news.internal.x")
    watch_ok = Advisories(brokers.url("a"), "Topic", "news.ok")
    try:
        with client(brokers.url("b")) as cb:
            inner = cb.create_receiver("topic://news.internal.x", credit=10)
            probe = cb.create_receiver("topic://news.ok", credit=10)
            watch_ok.wait(lambda n: n == 1)  # the matched one is federated ...
            send(brokers.url("a"), "topic://news.internal.x", ["secret"])
            send(brokers.url("a"), "topic://news.ok", ["ok"])
            assert receive_all(probe, 1) == ["ok"]
            # ... the excluded one is not: a receiver for it would have been attached
            # before the probe's (its demand came first) and carried "secret" (sent
            # on A before "ok") into B before "ok"; the marker is published on B after
            send(brokers.url("b"), "topic://news.internal.x", ["end"])
            assert before_marker(inner, "end") == []
            assert watch.count is None  # no consumer ever appeared on A for it
    finally:
        watch.close()
        watch_ok.close()


def _ring_or_mesh(brokers: Brokers, names: list[str], links: dict[str, list[str]], max_hops: int,
                  topic: str) -> None:
    for name in names:  # a peer that is not up yet is retried
        brokers.start(name, "".join(connection_xml(peer, brokers.port(peer),
                                                   address_federation(max_hops),
                                                   name=f"{name}-to-{peer}")
                                    for peer in links[name]))
    pullers = {n: sum(n in links[m] for m in names) for n in names}
    watches = {n: Advisories(brokers.url(n), "Topic", topic) for n in names}
    conns = {n: client(brokers.url(n)) for n in names}
    opened = {n: c.__enter__() for n, c in conns.items()}
    try:
        subs = {n: opened[n].create_receiver(f"topic://{topic}", credit=500) for n in names}
        for n in names:  # its own subscriber and one federation receiver per broker pulling from it
            watches[n].wait(lambda c, want=1 + pullers[n]: c == want)
        for n in names:
            send(brokers.url(n), f"topic://{topic}", [f"{n}-{i}" for i in range(5)])
        everything = sorted(f"{n}-{i}" for n in names for i in range(5))
        for n in names:
            got = receive_all(subs[n], len(everything), timeout=60)
            assert sorted(got) == everything, f"{n} got {sorted(got)}"
        # Barrier: every broker publishes a marker once all subscribers have every
        # message. A copy that would reach a subscriber twice was routed, on the broker
        # it comes from, no later than that broker's own subscriber got it -- so before
        # that broker's marker, which follows it on the same federation link.
        markers = [f"end-{n}" for n in names]
        for n in names:
            send(brokers.url(n), f"topic://{topic}", [f"end-{n}"])
        for n in names:
            upstream = [f"end-{m}" for m in links[n]] + [f"end-{n}"]
            got = until_markers(subs[n], upstream, timeout=60)
            assert [b for b in got if b not in markers] == [], f"{n} got a message twice"
            assert len(got) == len(set(got)), f"{n} got a marker twice: {got}"
    finally:
        for w in watches.values():
            w.close()
        for c in conns.values():
            c.__exit__(None, None, None)


def test_ring_of_three_with_max_hops_delivers_once_per_subscriber(brokers: Brokers) -> None:
    # each broker federates from the next one: a -> b -> c -> a
    _ring_or_mesh(brokers, ["a", "b", "c"], {"a": ["b"], "b": ["c"], "c": ["a"]}, 2, "news.ring")


def test_a_ring_without_max_hops_is_named_as_a_loop(brokers: Brokers) -> None:
    """A ring of three brokers federating an address with max-hops 0 (Artemis'
    default: no limit) passes a message round for ever (no-local stops only the
    step straight back). The message is not dropped (that is what no limit means),
    but the loop is logged, once per broker, with the setting that ends it."""
    names, links = ["a", "b", "c"], {"a": "b", "b": "c", "c": "a"}
    for name in names:
        peer = links[name]
        brokers.start(name, connection_xml(peer, brokers.port(peer), address_federation(0),
                                           name=f"{name}-to-{peer}"))
    watches = {n: Advisories(brokers.url(n), "Topic", "news.loop") for n in names}
    try:
        with client(brokers.url("a")) as ca, client(brokers.url("b")) as cb, \
                client(brokers.url("c")) as cc:
            for conn in (ca, cb, cc):
                conn.create_receiver("topic://news.loop", credit=1000)
            for n in names:  # its subscriber and the federation receiver pulling from it
                watches[n].wait(lambda c: c == 2)
            send(brokers.url("a"), "topic://news.loop", ["round and round"])
            wait_until(lambda: "brokers pass it round in a loop" in brokers.logs(),
                       "the loop named in a log", 60, detail=lambda: brokers.logs()[-3000:])
            assert "set max-hops (a ring of n brokers: n - 1" in brokers.logs()
    finally:
        for w in watches.values():
            w.close()
        brokers.close()  # the message is still going round
    assert brokers.logs().count("brokers pass it round in a loop") <= 3  # once per broker


@pytest.mark.slow
def test_full_mesh_of_four_with_max_hops_one(brokers: Brokers) -> None:
    names = ["a", "b", "c", "d"]
    _ring_or_mesh(brokers, names, {n: [m for m in names if m != n] for n in names}, 1, "news.mesh")


QUEUE_FEDERATION = ('<federation><local-queue-policy name="work"><include queue-match="work.*"/>'
                    '</local-queue-policy><property key="queueReceiverIdleTimeout" value="500"/>'
                    '</federation>')


def test_queue_federation_prefers_local_consumers_and_moves_the_backlog(brokers: Brokers) -> None:
    brokers.start("b", queues=("work.1",))
    brokers.start("a", connection_xml("b", brokers.port("b"), QUEUE_FEDERATION))
    watch_b = Advisories(brokers.url("b"), "Queue", "work.1")
    try:
        with client(brokers.url("b")) as cb, client(brokers.url("a")) as ca:
            local = cb.create_receiver("queue://work.1", credit=20)
            remote = ca.create_receiver("queue://work.1", credit=20)
            assert watch_b.wait(lambda n: n == 2) == 2  # B's own consumer and A's receiver
            send(brokers.url("b"), "queue://work.1", [f"w{i}" for i in range(5)])
            got = []
            for _ in range(5):
                got.append(local.receive(timeout=20).body)  # held, not accepted
            # the local consumer is preferred: it holds all five (unaccepted), so
            # none went to A's receiver first
            assert got == [f"w{i}" for i in range(5)]
            local.close()  # leaves without accepting: the backlog moves to A
            send(brokers.url("b"), "queue://work.1", ["end"])
            assert sorted(before_marker(remote, "end")) == [f"w{i}" for i in range(5)]
    finally:
        watch_b.close()
