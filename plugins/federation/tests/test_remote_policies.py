"""Remote policies: a broker's ``<remote-address-policy>`` / ``<remote-queue-policy>``
travel over its control link and the peer applies them -- demand on the peer
opens receivers back over the connection the first broker opened, pulling from it."""

from __future__ import annotations

from fedtools import (
    Advisories,
    Brokers,
    before_marker,
    client,
    connection_xml,
    receive_all,
    send,
    wait_for_log,
)

REMOTE_ADDRESS = ('<federation><remote-address-policy name="back" max-hops="1">'
                  '<include address-match="news.#"/></remote-address-policy>'
                  '<property key="addressReceiverIdleTimeout" value="500"/></federation>')
REMOTE_QUEUE = ('<federation><remote-queue-policy name="work"><include queue-match="work.*"/>'
                '</remote-queue-policy><property key="queueReceiverIdleTimeout" value="500"/>'
                '</federation>')


def test_remote_address_policy_makes_the_peer_pull_from_the_broker_that_sent_it(
        brokers: Brokers) -> None:
    # only A is configured: it connects to B and asks B to federate news.# from A
    brokers.start("b")
    brokers.start("a", connection_xml("b", brokers.port("b"), REMOTE_ADDRESS))
    watch_a = Advisories(brokers.url("a"), "Topic", "news.eu")
    try:
        with client(brokers.url("b")) as cb:
            sub = cb.create_receiver("topic://news.eu", credit=100)
            # demand on B: B's receiver, attached over A's connection, subscribes on A
            assert watch_a.wait(lambda n: n == 1) == 1
            send(brokers.url("a"), "topic://news.eu", [f"n{i}" for i in range(10)])
            assert receive_all(sub, 10) == [f"n{i}" for i in range(10)]
            send(brokers.url("a"), "topic://news.eu", ["end"])
            assert before_marker(sub, "end") == []
            sub.close()
            assert watch_a.wait(lambda n: n == 0) == 0  # closed after A's idle timeout
            send(brokers.url("a"), "topic://news.eu", ["gone"])  # for nobody
            sub = cb.create_receiver("topic://news.eu", credit=100)
            assert watch_a.wait(lambda n: n == 1) == 1  # demand again: a new receiver
            send(brokers.url("a"), "topic://news.eu", ["again"])
            assert receive_all(sub, 1) == ["again"]
    finally:
        watch_a.close()


def test_remote_address_policy_serves_consumers_the_peer_already_had(brokers: Brokers) -> None:
    brokers.start("b")
    with client(brokers.url("b")) as cb:
        sub = cb.create_receiver("topic://news.early", credit=10)
        brokers.start("a", connection_xml("b", brokers.port("b"), REMOTE_ADDRESS))
        wait_for_log(brokers, "b", "receiver attached for news.early")
        send(brokers.url("a"), "topic://news.early", ["first"])
        assert receive_all(sub, 1) == ["first"]


def test_remote_queue_policy_makes_the_peer_pull_from_the_queue(brokers: Brokers) -> None:
    brokers.start("b")
    brokers.start("a", connection_xml("b", brokers.port("b"), REMOTE_QUEUE), queues=("work.1",))
    watch_a = Advisories(brokers.url("a"), "Queue", "work.1")
    try:
        send(brokers.url("a"), "queue://work.1", [f"w{i}" for i in range(5)])
        with client(brokers.url("b")) as cb:
            r = cb.create_receiver("queue://work.1", credit=20)
            assert watch_a.wait(lambda n: n == 1) == 1  # B's queue receiver on A
            assert receive_all(r, 5) == [f"w{i}" for i in range(5)]
            send(brokers.url("a"), "queue://work.1", ["end"])
            assert before_marker(r, "end") == []
            r.close()
            assert watch_a.wait(lambda n: n == 0) == 0
    finally:
        watch_a.close()
