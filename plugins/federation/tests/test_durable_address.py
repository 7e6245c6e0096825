"""The peer side of an address receiver keeps a durable subscription (as Artemis
keeps a durable queue): what is published while the pulling broker is down
reaches it once it is back."""

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
    wait_for_log,
)

FEDERATION = ('<federation><local-address-policy name="news"><include address-match="news.#"/>'
              '</local-address-policy><property key="addressReceiverIdleTimeout" value="500"/>'
              '</federation>')


@pytest.mark.slow
def test_messages_published_while_the_pulling_broker_was_killed_arrive_after_its_restart(
        brokers: Brokers) -> None:
    brokers.start("a")
    pulling = connection_xml("a", brokers.port("a"), FEDERATION)
    # persistent: B keeps its node id, so its receiver names the same subscription again
    brokers.start("b", pulling, persistent=True)
    watch_a = Advisories(brokers.url("a"), "Topic", "news.eu")
    try:
        with client(brokers.url("b")) as cb:
            sub = cb.create_receiver("topic://news.eu", credit=100)
            assert watch_a.wait(lambda n: n == 1) == 1
            send(brokers.url("a"), "topic://news.eu", ["before"])
            assert receive_all(sub, 1) == ["before"]
        brokers.procs["b"].kill()  # kill -9: the link is lost, not closed
        assert watch_a.wait(lambda n: n == 0) == 0
        send(brokers.url("a"), "topic://news.eu", [f"m{i}" for i in range(10)])
        brokers.start("b", pulling, persistent=True)
        with client(brokers.url("b")) as cb:
            sub = cb.create_receiver("topic://news.eu", credit=100)
            assert receive_all(sub, 10, timeout=60) == [f"m{i}" for i in range(10)]
            send(brokers.url("a"), "topic://news.eu", ["end"])
            assert before_marker(sub, "end") == []  # nothing twice, "before" not again
    finally:
        watch_a.close()


@pytest.mark.slow
def test_auto_delete_removes_the_subscription_a_lost_receiver_left(brokers: Brokers) -> None:
    brokers.start("a")
    pulling = connection_xml("a", brokers.port("a"), FEDERATION.replace(
        'name="news"', 'name="news" auto-delete="true" auto-delete-delay="200" '
        'auto-delete-message-count="-1"'))
    brokers.start("b", pulling, persistent=True)
    watch_a = Advisories(brokers.url("a"), "Topic", "news.eu")
    try:
        with client(brokers.url("b")) as cb:
            cb.create_receiver("topic://news.eu", credit=100)
            assert watch_a.wait(lambda n: n == 1) == 1
        brokers.procs["b"].kill()
        wait_for_log(brokers, "a", "federation subscription federation.to-a.policy.news."
                      "address.news.eu.node.")
        wait_for_log(brokers, "a", " deleted")
        # published after the deletion: for nobody (kept, it would reach B below)
        send(brokers.url("a"), "topic://news.eu", ["gone"])
        brokers.start("b", pulling, persistent=True)
        with client(brokers.url("b")) as cb:
            sub = cb.create_receiver("topic://news.eu", credit=100)
            assert watch_a.wait(lambda n: n == 1) == 1
            send(brokers.url("a"), "topic://news.eu", ["end"])
            assert before_marker(sub, "end") == []
    finally:
        watch_a.close()
