"""<sender> and <receiver> against RabbitMQ 3.10's AMQP 1.0 plugin (a real
`rabbitmq-server`, started once per session on private ports), and nothing
lost when either side is killed with kill -9 mid-stream."""

from __future__ import annotations

import time

import pytest
from fedtools import Brokers, DurableNode, client, connection_xml, send
from proton import ConnectionException, Timeout
from relaymq.testing.peers import Peer

N = 1000
LINKS = '<sender address-match="outbound.#"/><receiver queue-name="inbound"/>'


def rabbit_url(peer: Peer) -> str:
    return f"amqp://guest:guest@127.0.0.1:{peer.amqp_port}"


def drain_until(url: str, address: str, want: set[str], timeout: float = 90.0,
                **kwargs: object) -> set[str]:
    """Receive (and accept) from `address` until every body of `want` was seen;
    duplicates are allowed (at-least-once), a missing body fails."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while not want <= seen:  # a peer that just restarted may drop us: connect again
        try:
            with client(url, **kwargs) as c:
                r = c.create_receiver(address, credit=200, options=DurableNode())
                while not want <= seen:
                    if time.monotonic() > deadline:
                        break
                    try:
                        m = r.receive(timeout=1.0)
                    except Timeout:
                        continue
                    seen.add(m.body)
                    r.accept()
        except (ConnectionException, Timeout):  # refused, or opened and not answered
            time.sleep(0.5)
        if time.monotonic() > deadline and not want <= seen:
            raise AssertionError(f"missing {len(want - seen)} of {len(want)}: "
                                 f"{sorted(want - seen)[:10]}")
    return seen


def wait_some(url: str, address: str, kwargs: dict[str, object], timeout: float = 60.0) -> None:
    """Wait until `address` has at least one message (the stream is under way). RabbitMQ
    3.10 cannot browse (it ignores distribution-mode copy): the message is taken and
    released, which puts it back on the queue."""
    deadline = time.monotonic() + timeout
    with client(url, **kwargs) as c:
        r = c.create_receiver(address, credit=1, options=DurableNode())
        while True:
            try:
                r.receive(timeout=1.0)
                r.release(delivered=False)
                return
            except Timeout:
                if time.monotonic() > deadline:
                    raise AssertionError(f"nothing reached {address}") from None


@pytest.mark.slow
def test_relaymq_killed_mid_stream_loses_nothing(brokers: Brokers, rabbitmq: Peer) -> None:
    rabbit = rabbit_url(rabbitmq)
    a = brokers.start("a", connection_xml("rabbit", rabbitmq.amqp_port, LINKS, user="guest"),
                      persistent=True, queues=("inbound",))
    out = [f"out-{i}" for i in range(N)]
    inn = [f"in-{i}" for i in range(N)]
    send(rabbit, "inbound", inn, durable=True, allowed_mechs="PLAIN")
    send(brokers.url("a"), "queue://outbound.orders", out, durable=True)
    wait_some(rabbit, "outbound.orders", {"allowed_mechs": "PLAIN"})
    a.kill()
    a.start()
    try:
        assert drain_until(rabbit, "outbound.orders", set(out), allowed_mechs="PLAIN") >= set(out)
        assert drain_until(brokers.url("a"), "queue://inbound", set(inn)) >= set(inn)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{brokers.logs()}") from None


@pytest.mark.slow
@pytest.mark.timeout(400)  # RabbitMQ's restart (up to 180 s on a loaded machine), then the drains
def test_rabbitmq_killed_mid_stream_loses_nothing(brokers: Brokers, rabbitmq: Peer) -> None:
    rabbit = rabbit_url(rabbitmq)
    brokers.start("a", connection_xml("rabbit", rabbitmq.amqp_port, LINKS, user="guest"),
                  persistent=True, queues=("inbound",))
    out = [f"out2-{i}" for i in range(N)]
    inn = [f"in2-{i}" for i in range(N)]
    send(rabbit, "inbound", inn, durable=True, allowed_mechs="PLAIN")
    send(brokers.url("a"), "queue://outbound.more", out, durable=True)
    wait_some(rabbit, "outbound.more", {"allowed_mechs": "PLAIN"})
    # What RabbitMQ accepted before the kill (persistent, on the durable queue the sender
    # link declared) is on its disk; the rest is still on `a`, which sends it again.
    # `start` returns once the same node (name, data directory) has recovered and
    # serves clients, so the drain's bound below does not include RabbitMQ's boot.
    rabbitmq.stop(kill=True)
    rabbitmq.start()
    try:
        assert drain_until(rabbit, "outbound.more", set(out), allowed_mechs="PLAIN") >= set(out)
        assert drain_until(brokers.url("a"), "queue://inbound", set(inn)) >= set(inn)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{brokers.logs()}") from None
