"""Incoming links handed to another plugin by their desired capability
(`relaymq_amqp.link_handlers`), and link capabilities on the wire, which
proton's engine does not carry by itself (`relaymq_amqp.attach`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from proton import Message
from relaymq_amqp import link_handlers
from relaymq_amqp.attach import patch_attaches, read_attach
from relaymq_amqp.encode import encode, frame, performative, symbol_array
from relaymq_amqp.outgoing import AmqpConnection, LinkRefused
from relaymq_amqp.scanner import decode
from relaymq_amqp.types import Symbol, UInt

SEEN: dict[str, Any] = {}


class EchoHandler:
    """Accepts links desiring ``test.echo``; refuses ``$TEST_ONLY...`` links without it."""

    address_prefixes = ("$TEST_ONLY",)

    def __init__(self, link: link_handlers.IncomingLink) -> None:
        self.link = link
        self.received: list[bytes] = []
        SEEN["handler"] = self

    def attach(self) -> None:
        link = self.link
        SEEN["desired"] = link.desired_capabilities
        SEEN["properties"] = link.remote_properties
        if "test.echo" not in link.desired_capabilities:
            link.refuse("amqp:not-allowed", "a $TEST_ONLY link must desire test.echo")
            return
        link.open(properties={"x-opt-answer": "42"}, offered_capabilities=["test.echo"], credit=10)

    def on_delivery(self, delivery: Any) -> None:
        data = self.link.receive(delivery)
        if data is not None:
            self.received.append(data)
            self.link.accept(delivery)
            self.link.flow(1)

    def on_flow(self) -> None:
        pass

    def on_detach(self, closed: bool) -> None:
        SEEN["detached"] = closed


def _setup(broker: Any) -> None:
    link_handlers.register(broker, "test.echo", EchoHandler)


def encoded(body: Any) -> bytes:
    return bytes(Message(body=body).encode())


async def test_capability_link_goes_to_its_handler(make_broker: Any) -> None:
    SEEN.clear()
    bt = make_broker("amqp://127.0.0.1:0", setup=_setup)
    conn = AmqpConnection(f"tcp://{bt.address()}", retry_interval=0.1)
    await conn.connect()
    try:
        sender = await conn.open_sender("anything", desired_capabilities=["test.echo"],
                                        properties={"x-opt-question": "why"})
        assert sender.remote_offered_capabilities == ["test.echo"]
        assert sender.remote_properties == {"x-opt-answer": "42"}
        assert SEEN["desired"] == ["test.echo"]
        assert SEEN["properties"] == {"x-opt-question": "why"}
        outcomes = await asyncio.gather(*(sender.send(encoded(i)) for i in range(5)))
        assert [o.state for o in outcomes] == ["accepted"] * 5
        bodies = []
        for data in SEEN["handler"].received:
            m = Message()
            m.decode(data)
            bodies.append(m.body)
        assert bodies == [0, 1, 2, 3, 4]
        # nothing reached a queue named "anything"
        assert bt.queue_size("anything") == 0
        await sender.close()
        for _ in range(100):
            if "detached" in SEEN:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the handler never saw the detach")
        assert SEEN["detached"] is True
        # an ordinary link next to it still works, also with a capability nobody serves
        plain = await conn.open_sender("queue://plain", desired_capabilities=["unknown.cap"])
        assert (await plain.send(encoded("x"))).accepted
        assert bt.queue_size("plain") == 1
    finally:
        await conn.close()


async def test_claimed_prefix_without_capability_is_refused(make_broker: Any) -> None:
    SEEN.clear()
    bt = make_broker("amqp://127.0.0.1:0", setup=_setup)
    conn = AmqpConnection(f"tcp://{bt.address()}", retry_interval=0.1)
    await conn.connect()
    try:
        with pytest.raises(LinkRefused, match="must desire test.echo"):
            await conn.open_sender("$TEST_ONLY_x")
        # the connection stays usable
        ok = await conn.open_sender("queue://after")
        assert (await ok.send(encoded("y"))).accepted
    finally:
        await conn.close()


def test_attach_capabilities_are_read_and_written() -> None:
    # AMQP 1.0: ... max-message-size (10), offered (11), desired (12), properties (13)
    attach = performative(0x12, ["link-1", UInt(0), False, None, None, None, None, None,
                                 None, None, None, None, None, {Symbol("k"): "v"}])
    out = frame(attach, channel=3) + frame(performative(0x13, [None]))  # attach + a flow
    patched = patch_attaches(out, {"link-1": (["o.cap"], ["d.cap", "e.cap"])})
    size = int.from_bytes(patched[:4], "big")
    fields = decode(patched[8 + 3:size])[0]
    assert read_attach(fields) == ("link-1", False, ["o.cap"], ["d.cap", "e.cap"])
    assert fields[11] == [Symbol("o.cap")] and fields[12] == [Symbol("d.cap"), Symbol("e.cap")]
    assert fields[13] == {"k": "v"} and fields[10] is None and fields[0] == "link-1"
    assert patched[6:8] == b"\x00\x03"  # channel kept
    assert patched[size:] == frame(performative(0x13, [None]))  # the next frame untouched
    assert patch_attaches(out, {"other": (["x"], None)}) == out
    assert read_attach(decode(encode([
        "n", UInt(1), True, None, None, None, None, None, None, None, None,
        symbol_array(["a"])]))[0]) == ("n", True, ["a"], [])
    # a symbol where max-message-size goes is not a capability
    assert read_attach(decode(encode([
        "n", UInt(1), True, None, None, None, None, None, None, None,
        symbol_array(["a"])]))[0]) is None
