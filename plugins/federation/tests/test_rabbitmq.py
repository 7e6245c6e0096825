"""<sender> and <receiver> against RabbitMQ 3.10's AMQP 1.0 plugin (a real
`rabbitmq-server`, started once per session on private ports), and nothing
lost when either side is killed with kill -9 mid-stream."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from fedtools import Brokers, DurableNode, client, connection_xml, send
from proton import ConnectionException, Timeout
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.model.destination import Destination
from relaymq.model.message import BodyType, Message
from relaymq.testing import wait_until_async
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


def _refusals_logged(peer: Peer) -> int:
    """How many attaches RabbitMQ refused for a dynamic target, by its own log."""
    log = peer.base / "log" / f"{peer.env['RABBITMQ_NODENAME']}.log"
    return log.read_text(errors="replace").count("Dynamic targets not supported")


async def test_a_peer_without_federation_refuses_it_once_per_try_and_the_connection_stays(
        rabbitmq: Peer, caplog: pytest.LogCaptureFixture) -> None:
    """RabbitMQ has no federation: it refuses the control link (a dynamic target) by
    ending the link's session. The federation says so once, shows it in management
    and tries again every retry-interval on a session of its own; the connection is
    made once and its <sender> forwards meanwhile (issue 11: it used to reconnect at
    every try, taking the sender's link with it)."""
    caplog.set_level(logging.INFO, logger="relaymq.federation")
    edge = Broker(load_config_text(f"""<broker brokerName="edge" persistent="false">
  <destinations><queue physicalName="work.1"/></destinations>
  <broker-connections>
    {connection_xml("rabbit", rabbitmq.amqp_port, '<federation><local-queue-policy name="work">'
                    '<include queue-match="work.*"/></local-queue-policy></federation>'
                    '<sender address-match="outbound.#"/>', user="guest")}
  </broker-connections></broker>""", "xml"), strict=True)
    before = _refusals_logged(rabbitmq)
    await edge.start()
    try:
        kconn = await edge.connect()
        await kconn.subscribe(Destination.queue("work.1"), on_message=lambda d: None)  # demand
        started = time.monotonic()
        await wait_until_async(lambda: _refusals_logged(rabbitmq) - before >= 4,
                               "four control links refused by RabbitMQ")
        tries, elapsed = _refusals_logged(rabbitmq) - before, time.monotonic() - started
        (conn,) = edge.management.broker_connections()
        fed = _operation(conn, "federation")
        reason = "the peer refused the control link (amqp:not-implemented: Dynamic targets not supported)"
        assert fed["control"] == f"refused: {reason}", fed
        assert fed["queue_waiting"] == ["work.1"] and fed["queue_receivers"] == []
        assert conn.detail["connects"] == 1 and conn.detail["connected"], conn.detail
        assert tries <= elapsed / 0.5 + 2, (tries, elapsed)  # retry-interval 300 ms, at least 0.5 s
        said = [r for r in caplog.records if "control link" in r.getMessage()]
        assert [(r.levelno, reason in r.getMessage()) for r in said] == [(logging.WARNING, True)], \
            [r.getMessage() for r in said]
        # the rest of the connection works: its <sender> forwards to RabbitMQ
        bodies = [f"fed-{i}" for i in range(20)]
        for body in bodies:
            await kconn.send(Message(body.encode(), destination=Destination.queue("outbound.fed"),
                                     body_type=BodyType.TEXT, durable=True))
        await wait_until_async(lambda: _operation(edge.management.broker_connections()[0],
                                                  "sender")["forwarded"] == 20,
                               "the 20 messages accepted by RabbitMQ")
        assert drain_until(rabbit_url(rabbitmq), "outbound.fed", set(bodies), timeout=30,
                           allowed_mechs="PLAIN") == set(bodies)
        (conn,) = edge.management.broker_connections()
        assert conn.detail["connects"] == 1, conn.detail
    finally:
        await edge.stop()


def _operation(conn: Any, element: str) -> dict[str, Any]:
    ops = conn.detail.get("operations", [])
    return next((op for op in ops if op.get("element") == element), {})
