"""The pinned proton-engine layer (`engine.py`) and the frame guard, in memory.

Two `Engine`s, a client and a server, are wired back to back; every call the
broker relies on is exercised here, so a proton upgrade that changes them
fails in this file first.
"""

from __future__ import annotations

import random
from typing import Any

import proton
import pytest
from proton import Message
from relaymq_amqp import engine as pn
from relaymq_amqp.encode import frame, performative
from relaymq_amqp.engine import Condition, Engine, Terminus
from relaymq_amqp.frames import FrameGuard
from relaymq_amqp.types import Described, Symbol, ULong


class Recorder:
    """Collects events as (name, pointer) pairs."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("on_"):
            raise AttributeError(name)
        return lambda *args: self.events.append((name, args))

    def names(self) -> list[str]:
        return [n for n, _ in self.events]

    def take(self, name: str) -> list[tuple[Any, ...]]:
        out = [a for n, a in self.events if n == name]
        self.events = [(n, a) for n, a in self.events if n != name]
        return out


class Pair:
    def __init__(self, max_frame_size: int = 0) -> None:
        self.client = Engine(server=False, max_frame_size=max_frame_size)
        self.server = Engine(server=True, max_frame_size=max_frame_size)
        self.c_events = Recorder()
        self.s_events = Recorder()
        self.wire: list[bytes] = []  # client -> server bytes, for the guard tests

    def pump(self) -> None:
        for _ in range(20):
            moved = False
            out = self.client.output()
            if out:
                self.wire.append(out)
                self.server.push(out)
                moved = True
            out = self.server.output()
            if out:
                self.client.push(out)
                moved = True
            self.client.pump(self.c_events)
            self.server.pump(self.s_events)
            if not moved:
                return

    def free(self) -> None:
        self.client.free()
        self.server.free()


@pytest.fixture
def pair() -> Any:
    p = Pair()
    p.client.open(container_id="client", desired_capabilities=["sole-connection-for-container"],
                  properties={Symbol("k"): "v"})
    p.pump()
    assert "on_connection_remote_open" in p.s_events.names()
    p.server.open(container_id="server", offered_capabilities=["ANONYMOUS-RELAY"])
    p.pump()
    yield p
    p.free()


def test_pinned_version() -> None:
    assert tuple(proton.VERSION[:3]) == pn.PINNED_VERSION


def test_open_exchanges_container_capabilities_and_properties(pair: Pair) -> None:
    assert pair.server.remote_container == "client"
    assert pair.server.remote_desired_capabilities == ["sole-connection-for-container"]
    assert pair.server.remote_properties == {"k": "v"}
    assert pair.client.remote_offered_capabilities == ["ANONYMOUS-RELAY"]


def open_link(pair: Pair, sending: bool, source: Terminus, target: Terminus) -> tuple[Any, Any]:
    ssn = pair.client.session()
    pn.session_open(ssn)
    link = pn.sender(ssn, "l1") if sending else pn.receiver(ssn, "l1")
    pn.set_source(link, source)
    pn.set_target(link, target)
    pn.link_open(link)
    pair.pump()
    (s_ssn,), = pair.s_events.take("on_session_remote_open")
    pn.session_open(s_ssn)
    (s_link,), = pair.s_events.take("on_link_remote_open")
    return link, s_link


def test_termini_round_trip(pair: Pair) -> None:
    selector = Described(ULong(0x0000468C00000004), "a > 1")
    src = Terminus(address="topic://t", durable=2, expiry_policy=pn.EXPIRE_NEVER,
                   distribution_mode=pn.DIST_MODE_COPY, capabilities=["topic"],
                   filter={Symbol("jms-selector"): selector}, kind=1)
    link, s_link = open_link(pair, False, src, Terminus(kind=2))
    got = pn.remote_source(s_link)
    assert (got.address, got.durable, got.expiry_policy, got.distribution_mode) == (
        "topic://t", 2, pn.EXPIRE_NEVER, pn.DIST_MODE_COPY)
    assert got.capabilities == ["topic"]
    assert got.filter == {"jms-selector": selector}
    assert pn.link_name(s_link) == "l1" and pn.link_is_sender(s_link)
    dyn = Terminus(dynamic=True, kind=2)
    link2 = pn.sender(pn.link_session(link), "l2")
    pn.set_target(link2, dyn)
    pn.link_open(link2)
    pair.pump()
    (s2,), = pair.s_events.take("on_link_remote_open")
    assert pn.remote_target(s2).dynamic


def test_transfer_settle_and_outcomes(pair: Pair) -> None:
    link, s_link = open_link(pair, True, Terminus(kind=1), Terminus(address="q", kind=2))
    pn.set_source(s_link, pn.remote_source(s_link))
    pn.set_target(s_link, pn.remote_target(s_link))
    pn.link_open(s_link)
    pn.link_flow(s_link, 10)
    pair.pump()
    assert pn.link_credit(link) == 10
    body = bytes(Message(body="x" * 5000).encode())
    d = pn.send(link, b"t1", body)
    pair.pump()
    (s_link2, sd), = pair.s_events.take("on_delivery")
    assert s_link2 == s_link and not pn.delivery_partial(sd)
    assert pair.server.recv(s_link, pn.delivery_pending(sd)) == body
    pn.link_advance(s_link)
    pn.settle_with(sd, pn.REJECTED, Condition("amqp:not-found", "nope"))
    pair.pump()
    (_, cd), = pair.c_events.take("on_delivery")
    assert cd == d and pn.delivery_remote_state(cd) == pn.REJECTED
    assert pn.remote_rejected_condition(cd) == Condition("amqp:not-found", "nope", None)


def test_modified_flags_and_drain(pair: Pair) -> None:
    # server sends to the client's receiver
    link, s_link = open_link(pair, False, Terminus(address="q", kind=1), Terminus(kind=2))
    pn.set_source(s_link, pn.remote_source(s_link))
    pn.link_open(s_link)
    pn.link_flow(link, 5)
    pair.pump()
    (fl,), = pair.s_events.take("on_link_flow")
    assert pn.link_credit(s_link) == 5
    d = pn.send(s_link, b"1", bytes(Message(body=1).encode()))
    assert pn.delivery_tag(d) == b"1"
    pair.pump()
    (_, cd), = pair.c_events.take("on_delivery")
    pn.link_advance(link)
    pn.settle_with(cd, pn.MODIFIED, failed=True, undeliverable=True)
    pair.pump()
    (_, sd), = pair.s_events.take("on_delivery")
    assert pn.delivery_remote_state(sd) == pn.MODIFIED
    assert pn.remote_modified_flags(sd) == (True, True)
    pn.link_drain(link, 0)
    pair.pump()
    assert pn.link_get_drain(s_link)
    pn.link_drained(s_link)
    pair.pump()
    assert pn.link_credit(link) == 0


def test_link_close_with_condition(pair: Pair) -> None:
    link, s_link = open_link(pair, True, Terminus(kind=1), Terminus(address="q", kind=2))
    pn.set_target(s_link, None)
    pn.link_open(s_link)
    pn.link_close(s_link, Condition("amqp:unauthorized-access", "no"))
    pair.pump()
    assert pair.c_events.take("on_link_remote_close")
    assert pn.link_remote_condition(link) == Condition("amqp:unauthorized-access", "no", None)


def test_connection_close_with_info(pair: Pair) -> None:
    pair.server.close(Condition("amqp:invalid-field", "dup", {Symbol("invalid-field"): Symbol("container-id")}))
    pair.pump()
    assert pair.client.remote_condition == Condition("amqp:invalid-field", "dup",
                                                     {"invalid-field": "container-id"})


def test_idle_timeout_tick() -> None:
    p = Pair()
    try:
        p.server = Engine(server=True, idle_timeout_ms=1000)
        p.client.open(container_id="c")
        p.pump()
        p.server.open(container_id="s")
        p.pump()
        now = pn.monotonic_ms()
        deadline = p.server.tick(now)
        assert deadline > now
        p.server.tick(now + 5000)  # nothing heard for 5 s
        p.server.pump(p.s_events)
        assert p.server.transport_condition is not None
        assert p.server.transport_condition.name == "amqp:resource-limit-exceeded"
    finally:
        p.free()


# ---------------------------------------------------------------------------
# the frame guard
# ---------------------------------------------------------------------------


def client_stream() -> bytes:
    """Everything a client writes for open, attach, credit and a few big transfers."""
    p = Pair(max_frame_size=512)
    try:
        p.client.open(container_id="c")
        p.pump()
        p.server.open(container_id="s")
        ssn = p.client.session()
        pn.session_open(ssn)
        link = pn.sender(ssn, "s")
        pn.set_target(link, Terminus(address="q", kind=2))
        pn.link_open(link)
        p.pump()
        (s_ssn,), = p.s_events.take("on_session_remote_open")
        pn.session_open(s_ssn)
        (s_link,), = p.s_events.take("on_link_remote_open")
        pn.link_open(s_link)
        pn.link_flow(s_link, 10)
        p.pump()
        for i in range(3):
            pn.send(link, bytes([i]), bytes(Message(body=b"y" * 3000).encode()))
        p.pump()
        pn.link_close(link)
        p.client.close()
        p.pump()
        return b"".join(p.wire)
    finally:
        p.free()


def test_guard_accepts_a_real_client_stream_in_any_chunking() -> None:
    stream = client_stream()
    rng = random.Random(7)
    for _ in range(50):
        guard = FrameGuard(512)
        pos = 0
        while pos < len(stream):
            size = rng.choice([1, 2, 3, 7, 13, 100, 600, 5000])
            chunk = stream[pos:pos + size]
            assert guard.feed(chunk) == len(chunk), guard.error
            pos += size
    assert FrameGuard(512).feed(stream) == len(stream)


@pytest.mark.parametrize("bad, condition", [
    (frame(performative(0x99, [])), "amqp:not-implemented"),
    (b"\x00\x00\x00\x0c\x02\x00\x00\x00\xff\xff\xff\xff", "amqp:decode-error"),
    (b"\x00\x00\x00\x04\x02\x00\x00\x00", "amqp:connection:framing-error"),
    (frame(performative(0x10, ["c"]), frame_type=1), "amqp:connection:framing-error"),
    (frame(b"\x00\x53\x10\xc0\x05\x01\xa1\x09ab"), "amqp:decode-error"),
    (frame(b"x" * 600), "amqp:connection:framing-error"),
])
def test_guard_stops_at_the_bad_frame(bad: bytes, condition: str) -> None:
    good = b"AMQP\x00\x01\x00\x00" + frame(performative(0x10, ["c"])) + frame(b"")
    guard = FrameGuard(512)
    assert guard.feed(good + bad) == len(good)
    assert guard.error is not None and guard.error[0] == condition
    byte_by_byte = FrameGuard(512)
    accepted = sum(byte_by_byte.feed(bytes([b])) for b in good + bad)
    assert accepted <= len(good + bad) and byte_by_byte.error is not None


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@pytest.mark.slow
@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"),
                    reason="not applicable here: reads VmRSS from /proc")
def test_free_gives_back_the_connection_and_its_deliveries() -> None:
    """A freed engine returns its connection, links and unsettled deliveries to
    the allocator: a broker that serves many short connections keeps its size.
    Each round leaves 64 unsettled 64 KiB deliveries behind (4 MiB); 24 rounds
    that leaked would grow the process by about 100 MiB. The 40 MiB bound is
    generous on purpose (it tells a leak from none, not one allocator from
    another), and the test is `slow` so the fast suite has no memory threshold."""
    body = bytes(Message(body=b"x" * 65536).encode())

    def round_trip() -> None:
        p = Pair()
        p.client.open(container_id="c")
        p.pump()
        p.server.open(container_id="s")
        p.pump()
        link, s_link = open_link(p, True, Terminus(kind=1), Terminus(address="q", kind=2))
        pn.set_target(s_link, pn.remote_target(s_link))
        pn.link_open(s_link)
        pn.link_flow(s_link, 64)
        p.pump()
        for i in range(64):
            p.client.send(link, i, body)
        got = 0
        for _ in range(100):
            p.pump()
            got += len(p.s_events.take("on_delivery"))
            if got >= 64:
                break
        assert got >= 64
        p.free()

    round_trip()
    before = _rss_kib()
    for _ in range(24):
        round_trip()
    assert _rss_kib() - before < 40 * 1024
