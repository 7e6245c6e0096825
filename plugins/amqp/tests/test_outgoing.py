"""The outgoing connection (for mirror/federation/sender/receiver), tested
against RelayMQ's own AMQP server on background-thread brokers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from proton import Message
from relaymq.spi.outgoing import AuthenticationFailed, ConnectFailed
from relaymq.testing import free_port, wait_until_async
from relaymq_amqp.outgoing import (
    AmqpConnection,
    IncomingMessage,
    LinkRefused,
    parse_uri,
)
from relaymq_amqp.outgoing.common import is_tls, port_of


def encoded(body: Any, **kw: Any) -> bytes:
    return bytes(Message(body=body, **kw).encode())


def decoded(data: bytes) -> Message:
    m = Message()
    m.decode(data)
    return m


def test_parse_failover_uri() -> None:
    eps, opts = parse_uri("tcp://a:1?sslEnabled=false#amqps://u:p@b#tcp://c")
    assert [(e.host, port_of(e), is_tls(e)) for e in eps] == [
        ("a", 1, False), ("b", 5671, True), ("c", 5672, False)]
    assert (eps[1].user, eps[1].password) == ("u", "p")
    with pytest.raises(ValueError):
        parse_uri("http://x")


async def test_send_receive_and_outcomes(amqp_broker: Any) -> None:
    conn = AmqpConnection(f"tcp://{amqp_broker.address()}", retry_interval=0.1)
    await conn.connect()
    try:
        assert "ANONYMOUS-RELAY" in conn.remote_offered_capabilities
        sender = await conn.open_sender("queue://out")
        outcomes = await asyncio.gather(*(sender.send(encoded(i)) for i in range(20)))
        assert all(o.accepted for o in outcomes)
        got: asyncio.Queue[IncomingMessage] = asyncio.Queue()
        receiver = await conn.open_receiver("queue://out", credit=5, on_message=got.put_nowait)
        bodies = []
        for _ in range(20):
            msg = await asyncio.wait_for(got.get(), 5)
            bodies.append(decoded(msg.data).body)
            msg.accept()
        assert bodies == list(range(20))
        await receiver.close()
        relay = await conn.open_sender(None)
        bad = await relay.send(encoded("no to"))
        assert bad.state == "rejected" and bad.condition is not None
        assert (await relay.send(encoded("x", address="topic://t"))).accepted
    finally:
        await conn.close()


async def test_send_with_calls_back_with_each_outcome(amqp_broker: Any) -> None:
    conn = AmqpConnection(f"tcp://{amqp_broker.address()}", retry_interval=0.1)
    await conn.connect()
    try:
        results: list[Any] = []
        sender = await conn.open_sender("queue://with")
        for i in range(50):
            sender.send_with(encoded(i), results.append)
        relay = await conn.open_sender(None)
        relay.send_with(encoded("no to"), results.append)
        await wait_until_async(lambda: len(results) == 51, timeout=10)
        assert all(r.accepted for r in results[:50])
        assert results[50].state == "rejected" and results[50].condition is not None
        got: asyncio.Queue[IncomingMessage] = asyncio.Queue()
        await conn.open_receiver("queue://with", credit=50, on_message=got.put_nowait)
        bodies = []
        for _ in range(50):
            m = await asyncio.wait_for(got.get(), 5)
            bodies.append(decoded(m.data).body)
            m.accept()
        assert bodies == list(range(50))  # in order, each once
    finally:
        await conn.close()


async def test_encoded_bytes_arrive_unchanged(amqp_broker: Any) -> None:
    conn = AmqpConnection(f"amqp://{amqp_broker.address()}")
    await conn.connect()
    try:
        data = encoded({"k": [1, 2]}, properties={"p": "v"}, durable=True, id="ID:1")
        await (await conn.open_sender("queue://same")).send(data)
        got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        def on_message(m: IncomingMessage) -> None:
            m.accept()
            if not got.done():
                got.set_result(m.data)

        await conn.open_receiver("queue://same", on_message=on_message)
        assert await asyncio.wait_for(got, 5) == data
    finally:
        await conn.close()


async def test_release_and_modify_come_back(amqp_broker: Any) -> None:
    conn = AmqpConnection(f"tcp://{amqp_broker.address()}")
    await conn.connect()
    try:
        await (await conn.open_sender("queue://again")).send(encoded("x"))
        seen: list[int] = []
        done = asyncio.Event()

        def on_message(m: IncomingMessage) -> None:
            seen.append(decoded(m.data).delivery_count)
            if len(seen) == 1:
                m.release()
            elif len(seen) == 2:
                m.modify(failed=True)
            else:
                m.accept()
                done.set()

        await conn.open_receiver("queue://again", credit=1, on_message=on_message)
        await asyncio.wait_for(done.wait(), 5)
        assert seen == [0, 0, 1]
    finally:
        await conn.close()


async def test_selector_browse_and_auto_accept(amqp_broker: Any) -> None:
    conn = AmqpConnection(f"tcp://{amqp_broker.address()}")
    await conn.connect()
    try:
        s = await conn.open_sender("queue://sel")
        for color in ("red", "blue", "red"):
            await s.send(encoded(color, properties={"color": color}))
        browsed: list[str] = []
        await conn.open_receiver("queue://sel", on_message=lambda m: browsed.append(decoded(m.data).body),
                                 browse=True, auto_accept=True)
        red: list[str] = []
        await conn.open_receiver("queue://sel", selector="color = 'red'", auto_accept=True,
                                 on_message=lambda m: red.append(decoded(m.data).body))
        await wait_until_async(lambda: len(browsed) == 3 and len(red) == 2,
                               "three browsed and two selected")
        assert browsed == ["red", "blue", "red"] and red == ["red", "red"]
        with pytest.raises(LinkRefused, match="invalid-field"):
            await conn.open_receiver("queue://sel", selector="= bad", on_message=lambda m: None)
    finally:
        await conn.close()


async def test_failover_to_the_next_host(amqp_broker: Any) -> None:
    dead = free_port()
    conn = AmqpConnection(f"tcp://127.0.0.1:{dead}#tcp://{amqp_broker.address()}", retry_interval=0.1)
    await conn.connect()
    try:
        assert conn.endpoint is not None and conn.endpoint.port != dead
    finally:
        await conn.close()


async def test_gives_up_after_the_reconnect_attempts() -> None:
    conn = AmqpConnection(f"tcp://127.0.0.1:{free_port()}", retry_interval=0.05, reconnect_attempts=2)
    with pytest.raises(ConnectFailed, match="after 3 attempt"):
        await conn.connect()
    await conn.close()


async def test_sasl_plain_and_refusal(make_broker: Any) -> None:
    from relaymq.broker.security import Principal
    from relaymq.errors import SecurityError
    from relaymq.hookspecs import hookimpl

    class Check:
        @hookimpl
        def relaymq_authenticate(self, request: Any) -> Principal | None:
            if (request.username, request.password) != ("bob", "pw"):
                raise SecurityError("no")
            return Principal("bob")

    bt = make_broker(setup=lambda b: b.plugins.register(Check()))
    ok = AmqpConnection(f"tcp://bob:pw@{bt.address()}")
    await ok.connect()
    await ok.close()
    bad = AmqpConnection(f"tcp://{bt.address()}", user="bob", password="wrong", reconnect_attempts=0)
    with pytest.raises(AuthenticationFailed):
        await bad.connect()
    await bad.close()


@pytest.mark.slow
async def test_reconnects_and_reattaches_after_a_broker_restart(make_broker: Any) -> None:
    port = free_port()
    uri = f"amqp://127.0.0.1:{port}"
    first = make_broker(uri)
    events: list[str] = []
    conn = AmqpConnection(f"tcp://127.0.0.1:{port}", retry_interval=0.1,
                          on_connected=lambda c: events.append("up"),
                          on_disconnected=lambda c, e: events.append("down"))
    await conn.connect()
    try:
        sender = await conn.open_sender("queue://survive")
        assert (await sender.send(encoded("before"))).accepted
        await asyncio.to_thread(first.stop)
        await wait_until_async(lambda: "down" in events, "the connection to notice the loss")
        pending = sender.send(encoded("during"))  # waits for credit on the next connection
        second = make_broker(uri)
        await conn.wait_connected(10)
        assert (await asyncio.wait_for(pending, 10)).accepted
        assert events[:3] == ["up", "down", "up"]
        assert second.queue_size("survive") == 1
    finally:
        await conn.close()
