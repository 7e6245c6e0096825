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
from relaymq_amqp.frames import (
    NOT_PLAIN,
    PLAIN,
    SETTLED_ACCEPT,
    FrameGuard,
    disposition_kind,
    plain_disposition,
)
from relaymq_amqp.scanner import DecodeError, decode
from relaymq_amqp.types import Described, Symbol, UInt, ULong


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


def consumer_stream() -> bytes:
    """What a proton consumer writes when it settles six deliveries one by one,
    out of order (so proton cannot merge them into ranges), with every outcome."""
    p = Pair()
    try:
        p.client.open(container_id="c")
        p.pump()
        p.server.open(container_id="s")
        ssn = p.client.session()
        pn.session_open(ssn)
        link = pn.receiver(ssn, "r")
        pn.set_source(link, Terminus(address="q", kind=1))
        pn.link_open(link)
        pn.link_flow(link, 10)
        p.pump()
        (s_ssn,), = p.s_events.take("on_session_remote_open")
        pn.session_open(s_ssn)
        (s_link,), = p.s_events.take("on_link_remote_open")
        pn.link_open(s_link)
        p.pump()
        for i in range(6):
            pn.send(s_link, bytes([i]), bytes(Message(body="m").encode()))
        p.pump()
        deliveries = [d for _, (_lk, d) in [e for e in p.c_events.events if e[0] == "on_delivery"]]
        assert len(deliveries) == 6
        for _ in deliveries:
            pn.link_advance(link)
        outcomes = [(0, pn.ACCEPTED), (2, pn.RELEASED), (4, pn.REJECTED), (1, pn.MODIFIED),
                    (5, pn.ACCEPTED), (3, pn.ACCEPTED)]
        for i, state in outcomes:
            if state == pn.REJECTED:
                pn.settle_with(deliveries[i], state, Condition("amqp:internal-error", "no"))
            elif state == pn.MODIFIED:
                pn.settle_with(deliveries[i], state, None, True, False)
            else:
                pn.settle_with(deliveries[i], state)
            p.pump()
        return b"".join(p.wire)
    finally:
        p.free()


def _frames(stream: bytes) -> list[bytes]:
    pos, out = 8, []
    while pos < len(stream):
        size = int.from_bytes(stream[pos:pos + 4], "big")
        out.append(stream[pos:pos + size])
        pos += size
    return out


def _disposition_fields(frame_bytes: bytes) -> int | None:
    """Where a disposition frame's fields start (None for other frames)."""
    body = frame_bytes[4] * 4  # the data offset, in 4-byte words
    if frame_bytes[body:body + 3] == b"\x00\x53\x15":
        return body + 3
    return None


def test_guard_takes_a_consumers_dispositions_of_every_outcome() -> None:
    stream = consumer_stream()
    dispositions = [f for f in _frames(stream) if _disposition_fields(f) is not None]
    assert len(dispositions) >= 6
    plain = [f for f in dispositions if plain_disposition(f, _disposition_fields(f), len(f))]
    # accepted and released are checked in place; rejected and modified carry fields
    # and are decoded as before
    assert 0 < len(plain) < len(dispositions)
    for f in dispositions:
        fields = _disposition_fields(f)
        assert fields is not None
        assert decode(f[fields:])[0][0] is True  # the receiver's role
    guard = FrameGuard(512)
    assert guard.feed(stream) == len(stream), guard.error
    byte_by_byte = FrameGuard(512)
    assert sum(byte_by_byte.feed(bytes([b])) for b in stream) == len(stream)


def test_plain_dispositions_are_never_more_lenient_than_a_full_decode() -> None:
    """Every disposition the guard passes without decoding also decodes fully, to
    the end of its frame; a corrupted one it would not decode is left to the full
    check, which refuses it."""
    accepted = Described(ULong(0x24), [])
    samples = [
        performative(0x15, [True, UInt(first), UInt(last), True, accepted])
        for first, last in ((0, 0), (7, 7), (300, 300), (5, 70000), (0xFFFFFFFF, 0xFFFFFFFF))
    ] + [
        performative(0x15, [True, UInt(3), None, True, Described(ULong(0x26), [])]),
        performative(0x15, [True, UInt(3)]),
        performative(0x15, [True, UInt(3), UInt(4), False, accepted, True]),
    ]
    for body in samples:
        data = frame(body)
        assert plain_disposition(data, 11, len(data)), data.hex()
        assert FrameGuard(512).feed(b"AMQP\x00\x01\x00\x00" + data) == len(data) + 8
    rng = random.Random(16)
    checked = 0
    for _ in range(3000):
        data = bytearray(frame(rng.choice(samples)))
        for _ in range(rng.randint(1, 2)):
            data[rng.randrange(11, len(data))] = rng.choice(
                [0x00, 0x40, 0x41, 0x42, 0x43, 0x45, 0x52, 0x53, 0x56, 0x70, 0xA1, 0xC0, 0xD0,
                 rng.randrange(256)])
        raw = bytes(data)
        if not plain_disposition(raw, 11, len(raw)):
            continue
        checked += 1
        try:
            value, end = decode(raw, 11)
        except DecodeError as exc:
            raise AssertionError(f"passed unchecked but does not decode: {raw.hex()}") from exc
        assert isinstance(value, list) and end == len(raw), raw.hex()
    assert checked > 100
    # a list that says five fields but holds four: refused by the full check
    broken = frame(b"\x00\x53\x15\xc0\x05\x05\x41\x43\x43\x41")
    assert not plain_disposition(broken, 11, len(broken))
    guard = FrameGuard(512)
    preamble = b"AMQP\x00\x01\x00\x00"
    assert guard.feed(preamble + broken) == len(preamble)
    assert guard.error is not None and guard.error[0] == "amqp:decode-error"


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


def _says_settled_accept(raw: bytes) -> bool:
    """What a full decode says: the receiver settled the range with `accepted`."""
    fields = decode(raw, 11)[0]
    return (len(fields) >= 5 and fields[0] is True and fields[3] is True
            and isinstance(fields[4], Described) and fields[4].descriptor == 0x24)


def test_guard_knows_a_read_holds_only_settled_accepts() -> None:
    """`accepts_only` (the connection then settles delivery events without asking
    proton for their state) holds only when every disposition of the chunk is the
    receiver's settled `accepted`, and never for a disposition it did not check
    in place."""
    accepted = Described(ULong(0x24), [])
    released = Described(ULong(0x26), [])
    header = b"AMQP\x00\x01\x00\x00"

    def disp(*fields: Any) -> bytes:
        return frame(performative(0x15, list(fields)))

    accept_one, accept_range = disp(True, UInt(1), None, True, accepted), \
        disp(True, UInt(2), UInt(9), True, accepted)
    kinds = {
        accept_one: SETTLED_ACCEPT,
        accept_range: SETTLED_ACCEPT,
        disp(True, UInt(3), UInt(3), True, accepted, True): SETTLED_ACCEPT,
        disp(True, UInt(3), None, False, accepted): PLAIN,  # not settled
        disp(True, UInt(3), None, True, released): PLAIN,
        disp(True, UInt(3), None, True): PLAIN,  # settled without an outcome
        disp(True, UInt(3), None, True, None): PLAIN,
        disp(False, UInt(3), None, True, accepted): PLAIN,  # about the peer's transfers
        disp(True, UInt(3)): PLAIN,
    }
    for raw, kind in kinds.items():
        assert disposition_kind(raw, 11, len(raw)) == kind, raw.hex()
        assert (kind == SETTLED_ACCEPT) == _says_settled_accept(raw), raw.hex()
        guard = FrameGuard(512)
        chunk = header + accept_one + raw + accept_range
        assert guard.feed(chunk) == len(chunk)
        assert guard.accepts_only == (kind == SETTLED_ACCEPT)
        assert guard.feed(accept_one) == len(accept_one) and guard.accepts_only
    # corrupted plain frames: whatever is passed as a settled accept decodes as one
    rng = random.Random(1616)
    checked = 0
    for _ in range(3000):
        data = bytearray(rng.choice([accept_one, accept_range]))
        data[rng.randrange(11, len(data))] = rng.choice(
            [0x00, 0x24, 0x26, 0x40, 0x41, 0x42, 0x43, 0x45, 0x52, 0x53, 0x70, 0xC0,
             rng.randrange(256)])
        raw = bytes(data)
        if disposition_kind(raw, 11, len(raw)) == SETTLED_ACCEPT:
            checked += 1
            assert _says_settled_accept(raw), raw.hex()
    assert checked > 50
    # a rejected outcome carries fields: decoded in full, so proton says what it is
    rejected = disp(True, UInt(4), None, True,
                    Described(ULong(0x25), [Described(ULong(0x1D), [Symbol("amqp:x")])]))
    assert disposition_kind(rejected, 11, len(rejected)) == NOT_PLAIN
    guard = FrameGuard(512)
    guard.feed(header)
    assert guard.feed(accept_one + rejected) == len(accept_one) + len(rejected)
    assert not guard.accepts_only
    # a settled accept split across reads is judged, in full, by the read that ends it
    guard.feed(accept_one[:7])
    assert guard.accepts_only
    assert guard.feed(accept_one[7:]) == len(accept_one) - 7
    assert not guard.accepts_only
    # transfers and flows alone say nothing about outcomes
    flow = frame(performative(0x13, [UInt(0), UInt(100), UInt(0), UInt(100)]))
    assert guard.feed(flow) == len(flow) and guard.accepts_only
