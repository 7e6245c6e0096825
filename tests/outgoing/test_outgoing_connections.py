"""Outgoing connections through the kernel registry (`broker.outgoing`), over
AMQP and STOMP, against RelayMQ brokers listening on real loopback sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.hookspecs import hookimpl
from relaymq.model.destination import Destination
from relaymq.model.message import BodyType, Message
from relaymq.outgoing import OutgoingConnections
from relaymq.spi.outgoing import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectionState,
    ConnectOptions,
    Delivery,
    NoOutgoingProvider,
    Outcome,
    parse_endpoints,
)
from relaymq.testing import broker_config, running_broker
from relaymq.testing import free_port_below_ephemeral as free_port

SCHEMES = ["amqp", "stomp"]


async def until(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def text(body: str, dest: str = "queue://q", **props: Any) -> Message:
    return Message(body.encode(), destination=Destination.parse(dest), body_type=BodyType.TEXT,
                   durable=True, properties=dict(props))


def url(broker: Broker, scheme: str) -> str:
    return f"{scheme}://{broker.connector_address(scheme)}"


async def test_parse_endpoints_failover_forms() -> None:
    eps, common = parse_endpoints("failover:(stomp://a:1,stomp://u:p@b:2?x=1)?randomize=false")
    assert [(e.scheme, e.host, e.port) for e in eps] == [("stomp", "a", 1), ("stomp", "b", 2)]
    assert (eps[1].user, eps[1].password, eps[1].options) == ("u", "p", {"x": "1"})
    assert common == {"randomize": "false"}
    eps, _ = parse_endpoints("tcp://a:5672#tcp://b:5673")
    assert [str(e) for e in eps] == ["tcp://a:5672", "tcp://b:5673"]
    with pytest.raises(ValueError, match="no host"):
        parse_endpoints(" # ")


async def test_unknown_scheme_and_mixed_failover_are_refused() -> None:
    reg = OutgoingConnections()
    with pytest.raises(NoOutgoingProvider, match="'mqtt://'.*installed: .*amqp.*stomp"):
        reg.open("mqtt://h:1883")
    with pytest.raises(ValueError, match="one protocol"):
        reg.open("amqp://a:1#stomp://b:2")


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_send_with_settlement_and_receive_with_credit(scheme: str) -> None:
    async with running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as broker:
        reg = OutgoingConnections()
        conn = await reg.connect(url(broker, scheme), ConnectOptions(name="peer"))
        try:
            assert conn.state is ConnectionState.OPEN
            (info,) = reg.list()
            assert (info.name, info.state, info.peer) == ("peer", "open", url(broker, scheme))
            session = await conn.session()
            sender = await session.open_sender("queue://orders")
            settled: list[Outcome | BaseException] = []
            futures = [sender.send(text(f"m{i}", "queue://orders", n=i, region="eu"),
                                   on_settled=settled.append) for i in range(50)]
            outcomes = await asyncio.gather(*futures)
            assert all(o.accepted for o in outcomes) and len(settled) == 50
            assert broker.queue_size("orders") == 50

            got: list[Delivery] = []
            receiver = await session.open_receiver("queue://orders", got.append, credit=10)
            await until(lambda: len(got) == 10, what="the first 10 (the credit)")
            for d in list(got):
                d.accept()
            await until(lambda: len(got) == 20, what="10 more after settling")
            # a second receiver gets exactly the rest: the first never took more than its credit
            other: list[Delivery] = []
            await session.open_receiver("queue://orders", other.append, credit=100)
            await until(lambda: len(other) == 30, what="the other 30")
            assert len(got) == 20
            for d in got[10:] + other:
                d.accept()
            first = got[0].message
            assert first.body == b"m0"
            # STOMP MESSAGE frames always carry content-length: bytes, as ActiveMQ reads them
            assert first.body_type == (BodyType.TEXT if scheme == "amqp" else BodyType.BYTES)
            assert str(first.properties["region"]) == "eu" and str(first.properties["n"]) == "0"
            assert first.durable
            await until(lambda: broker.queue_size("orders") == 0, what="acks to reach the broker")
            await receiver.close()
        finally:
            await conn.close()
        assert conn.state is ConnectionState.CLOSED and reg.list() == []


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_release_redelivers_and_selector_filters(scheme: str) -> None:
    async with running_broker(None, f"{scheme}://127.0.0.1:0") as broker:
        reg = OutgoingConnections()
        conn = await reg.connect(url(broker, scheme))
        try:
            session = await conn.session()
            sender = await session.open_sender("queue://sel")
            for region in ("eu", "us", "eu"):
                assert (await sender.send(text(region, "queue://sel", region=region))).accepted
            got: list[Delivery] = []
            await session.open_receiver("queue://sel", got.append, credit=5,
                                        selector="region = 'eu'")
            await until(lambda: len(got) == 2, what="two eu messages")
            got[0].release()
            first = got[0].message.message_id
            # (STOMP gives messages back by subscribing again: the unsettled second one comes too)
            await until(lambda: any(d.message.message_id == first for d in got[2:]),
                        what="the released one again")

            def accept_all() -> bool:
                for d in got[1:]:
                    d.accept()
                return broker.queue_size("sel") == 1

            await until(accept_all, what="only 'us' left")
            assert {d.message.body for d in got} == {b"eu"}
        finally:
            await conn.close()


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_failover_to_the_second_host_when_the_first_is_down(scheme: str) -> None:
    async with running_broker(None, f"{scheme}://127.0.0.1:0") as broker:
        dead = f"{scheme}://127.0.0.1:{free_port()}"
        reg = OutgoingConnections()
        conn = await reg.connect(f"{dead}#{url(broker, scheme)}",
                                 ConnectOptions(retry_interval=0.05, reconnect_attempts=2))
        try:
            assert conn.peer == url(broker, scheme)
            assert conn.failures == 1 and "127.0.0.1" in (conn.last_error or "")
            sender = await (await conn.session()).open_sender("queue://fo")
            assert (await sender.send(text("x", "queue://fo"))).accepted
            assert broker.queue_size("fo") == 1
        finally:
            await conn.close()


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_gives_up_after_the_reconnect_attempts(scheme: str) -> None:
    reg = OutgoingConnections()
    seen: list[ConnectionState] = []
    conn = reg.open(f"{scheme}://127.0.0.1:{free_port()}",
                    ConnectOptions(name="nowhere", retry_interval=0.01, reconnect_attempts=2))
    conn.add_listener(lambda c, s: seen.append(s))
    with pytest.raises(ConnectFailed, match="after 3 attempt"):
        await conn.connect()
    assert conn.state is ConnectionState.FAILED and conn.failures == 3
    assert reg.list()[0].state == "failed" and "connect call failed" in (reg.list()[0].last_error or "").lower()
    assert seen[-1] is ConnectionState.FAILED and ConnectionState.RETRYING in seen
    await conn.close()


class _Credentials:
    @hookimpl
    def relaymq_authenticate(self, request: Any) -> Any:
        from relaymq.broker.security import Principal
        from relaymq.errors import SecurityError

        if (request.username, request.password) != ("bob", "pw"):
            raise SecurityError("bad user name or password")
        return Principal("bob")


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_credentials_and_refusal(scheme: str) -> None:
    broker = Broker(broker_config(f"{scheme}://127.0.0.1:0"), strict=True)
    broker.plugins.register(_Credentials())
    await broker.start()
    try:
        reg = OutgoingConnections()
        ok = await reg.connect(url(broker, scheme), ConnectOptions(user="bob", password="pw"))
        await ok.close()
        bad = reg.open(url(broker, scheme), ConnectOptions(user="bob", password="no",
                                                           reconnect_attempts=0))
        with pytest.raises(AuthenticationFailed):
            await bad.connect()
        assert bad.state is ConnectionState.FAILED
        await bad.close()
    finally:
        await broker.stop()


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
async def test_reconnects_after_the_peer_restarts(scheme: str) -> None:
    port = free_port()
    uri = f"{scheme}://127.0.0.1:{port}"
    reg = OutgoingConnections()
    states: list[ConnectionState] = []
    got: list[Delivery] = []
    first = Broker(broker_config(uri), strict=True)
    await first.start()
    conn = reg.open(uri, ConnectOptions(retry_interval=0.05))
    conn.add_listener(lambda c, s: states.append(s))
    await conn.connect()
    try:
        session = await conn.session()
        sender = await session.open_sender("queue://out")
        await session.open_receiver("queue://in", lambda d: (got.append(d), d.accept()), credit=10)
        assert (await sender.send(text("before", "queue://out"))).accepted
        await first.stop()
        await until(lambda: conn.state is ConnectionState.RETRYING, what="the loss to be seen")
        pending = sender.send(text("during", "queue://out"))  # waits for the next connection
        second = Broker(broker_config(uri), strict=True)
        await second.start()
        try:
            await conn.wait_open(10)
            assert (await asyncio.wait_for(pending, 10)).accepted
            assert second.queue_size("out") == 1
            # the receiver subscribed again on the new connection
            producer = await reg.connect(uri)
            psend = await (await producer.session()).open_sender("queue://in")
            assert (await psend.send(text("after", "queue://in"))).accepted
            await until(lambda: [d.message.body for d in got] == [b"after"], what="delivery")
            await producer.close()
            assert states[:3] == [ConnectionState.OPEN, ConnectionState.RETRYING,
                                  ConnectionState.OPEN] or states.count(ConnectionState.OPEN) >= 2
            assert conn.connects == 2
        finally:
            await conn.close()
            await second.stop()
    finally:
        await conn.close()


@pytest.mark.parametrize("send_scheme,recv_scheme", [("stomp", "amqp"), ("amqp", "stomp")])
async def test_a_message_crosses_protocols(send_scheme: str, recv_scheme: str) -> None:
    async with running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as broker:
        reg = OutgoingConnections()
        a = await reg.connect(url(broker, send_scheme))
        b = await reg.connect(url(broker, recv_scheme))
        try:
            m = text("héllo", "queue://x", region="eu")
            m.correlation_id = "c-1"
            m.type = "order"
            m.priority = 7
            sender = await (await a.session()).open_sender("queue://x")
            assert (await sender.send(m)).accepted
            got: list[Delivery] = []
            await (await b.session()).open_receiver("queue://x", got.append)
            await until(lambda: got, what="the message")
            r = got[0].message
            assert (r.body.decode(), r.correlation_id, r.type, r.priority) == (
                "héllo", "c-1", "order", 7)
            if recv_scheme == "amqp":
                assert r.body_type == BodyType.TEXT
            assert r.properties["region"] == "eu" and r.durable
            got[0].accept()
        finally:
            await a.close()
            await b.close()
