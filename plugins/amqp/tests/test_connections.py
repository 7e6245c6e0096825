"""Connection-level behaviour: SASL, TLS, heartbeats, limits, timeouts and bad input."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from proton import ConnectionException, Endpoint, Message, SSLDomain
from proton.utils import BlockingConnection
from relaymq.broker.security import Principal
from relaymq.errors import SecurityError
from relaymq.hookspecs import hookimpl
from relaymq.testing import wait_equal
from relaymq_amqp.encode import frame, performative
from relaymq_amqp.sasl import AMQP_HEADER, SASL_HEADER

from .raw_peer import RawPeer, close_condition

# ---------------------------------------------------------------------------
# SASL
# ---------------------------------------------------------------------------


class PasswordCheck:
    """A test-only authentication hook: alice/secret, and no anonymous users."""

    @hookimpl
    def relaymq_authenticate(self, request: Any) -> Principal | None:
        if request.username is None:
            raise SecurityError("anonymous access is disabled")
        if (request.username, request.password) != ("alice", "secret"):
            raise SecurityError(f"bad credentials for {request.username}")
        return Principal(request.username)


@pytest.fixture
def secured(make_broker: Any) -> Any:
    return make_broker(setup=lambda b: b.plugins.register(PasswordCheck()))


def test_sasl_plain_accepted(secured: Any) -> None:
    c = BlockingConnection(secured.url(), timeout=5, user="alice", password="secret",
                           allowed_mechs="PLAIN", allow_insecure_mechs=True)
    try:
        c.create_sender("queue://q").send(Message(body="hi"))
        assert c.create_receiver("queue://q", credit=1).receive(timeout=5).body == "hi"
        conns = secured.call(lambda: [k.user for k in secured.broker.connections])
        assert "alice" in conns
    finally:
        c.close()


def test_sasl_plain_rejected(secured: Any) -> None:
    with pytest.raises(ConnectionException):
        BlockingConnection(secured.url(), timeout=5, user="alice", password="wrong",
                           allowed_mechs="PLAIN", allow_insecure_mechs=True)


def test_sasl_anonymous_refused_by_the_hook(secured: Any) -> None:
    with pytest.raises(ConnectionException):
        BlockingConnection(secured.url(), timeout=5, allowed_mechs="ANONYMOUS")


def test_sasl_outcome_on_the_wire(secured: Any) -> None:
    peer = RawPeer(secured.address())
    peer.send(SASL_HEADER)
    assert peer.read_exact(8) == SASL_HEADER
    _, mechs = peer.read_frame()
    assert mechs.descriptor == 0x40 and set(mechs.value[0]) == {"PLAIN", "ANONYMOUS"}
    peer.send(frame(performative(0x41, [_sym("PLAIN"), b"\x00alice\x00nope"]), 1))
    _, outcome = peer.read_frame()
    assert outcome.descriptor == 0x44 and outcome.value[0] == 1  # auth failed
    assert peer.closed_within(30)  # generous: a bound, not a timing check


def test_sasl_pipelined_with_the_amqp_header_and_open(secured: Any) -> None:
    """A client may send its sasl-init, the AMQP header and its open in one go,
    before the outcome: the broker answers the SASL exchange, then the AMQP
    layer reads the header and open that followed."""
    peer = RawPeer(secured.address())
    peer.send(SASL_HEADER + frame(performative(0x41, [_sym("PLAIN"), b"\x00alice\x00secret"]), 1)
              + AMQP_HEADER + frame(performative(0x10, ["pipelining-client"])))
    assert peer.read_exact(8) == SASL_HEADER
    _, mechs = peer.read_frame()
    assert mechs.descriptor == 0x40
    _, outcome = peer.read_frame()
    assert outcome.descriptor == 0x44 and outcome.value[0] == 0  # ok
    assert peer.read_exact(8) == AMQP_HEADER
    _, opened = peer.read_frame()
    assert opened.descriptor == 0x10


def test_non_sasl_clients_can_be_refused(make_broker: Any) -> None:
    bt = make_broker("amqp://127.0.0.1:0?allowNonSaslConnections=false")
    peer = RawPeer(bt.address())
    peer.send(AMQP_HEADER)
    assert peer.read_exact(8) == SASL_HEADER  # the header we speak, then close
    assert peer.closed_within(30)  # generous: a bound, not a timing check


def _sym(name: str) -> Any:
    from relaymq_amqp.types import Symbol

    return Symbol(name)


# ---------------------------------------------------------------------------
# TLS
# ---------------------------------------------------------------------------


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed; it makes the test's self-signed certificate")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


@pytest.mark.parametrize("scheme", ["amqps", "amqp+ssl"])
def test_tls(make_broker: Any, certificate: tuple[Path, Path], scheme: str) -> None:
    cert, key = certificate
    bt = make_broker(f"{scheme}://127.0.0.1:0?certFile={cert}&keyFile={key}")
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(cert))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
    c = BlockingConnection(f"amqps://{bt.address(scheme)}", timeout=5, ssl_domain=domain)
    try:
        c.create_sender("queue://tls").send(Message(body="secret"))
        assert c.create_receiver("queue://tls", credit=1).receive(timeout=5).body == "secret"
    finally:
        c.close()


def test_tls_connector_without_a_certificate_fails_to_start(make_broker: Any) -> None:
    with pytest.raises(Exception, match="certFile"):
        make_broker("amqps://127.0.0.1:0")


# ---------------------------------------------------------------------------
# heartbeats and timeouts
# ---------------------------------------------------------------------------


def test_broker_heartbeats_keep_an_idle_client_connected(amqp_broker: Any, url: str) -> None:
    # on the wire: a peer that asks for a 1 s idle timeout gets empty frames from the broker
    peer = RawPeer(amqp_broker.address())
    peer.open_amqp(idle_timeout=1000)
    assert peer.empty_frames(3, timeout=30) == 3
    # and a real client with a 1 s idle timeout stays connected while idle
    c = BlockingConnection(url, timeout=5, heartbeat=1)
    try:
        end = time.monotonic() + 3
        while time.monotonic() < end:  # idle, but the client keeps processing I/O
            c.container.timeout = 0.05
            c.container.process()
        c.create_sender("queue://hb").send(Message(body="alive"))
        assert c.create_receiver("queue://hb", credit=1).receive(timeout=10).body == "alive"
        assert amqp_broker.call(lambda: len(amqp_broker.broker.connections)) == 2
    finally:
        c.close()


def test_silent_client_is_dropped_after_the_idle_timeout(make_broker: Any) -> None:
    bt = make_broker("amqp://127.0.0.1:0?idleTimeout=400")
    peer = RawPeer(bt.address())
    peer.open_amqp()
    frames = peer.frames_until_closed(timeout=5)  # raises if the broker never closes it
    cond = close_condition(frames)
    assert cond == "amqp:resource-limit-exceeded"


def test_client_that_never_opens_is_dropped(make_broker: Any) -> None:
    bt = make_broker("amqp://127.0.0.1:0?connectAttemptTimeout=300")
    silent = RawPeer(bt.address())
    assert silent.closed_within(30)  # generous: a bound, not a timing check
    half = RawPeer(bt.address())
    half.send(SASL_HEADER)  # starts SASL, never finishes it
    assert half.closed_within(30)


# ---------------------------------------------------------------------------
# limits and bad input
# ---------------------------------------------------------------------------


def test_maximum_connections(make_broker: Any) -> None:
    bt = make_broker("amqp://127.0.0.1:0?maximumConnections=1")
    first = BlockingConnection(bt.url(), timeout=5)
    try:
        with pytest.raises(ConnectionException, match="resource-limit-exceeded"):
            second = BlockingConnection(bt.url(), timeout=5)
            second.create_sender("queue://x")
        first.create_sender("queue://x").send(Message(body="first still works"))
    finally:
        first.close()


def test_channel_max_limits_sessions(make_broker: Any) -> None:
    bt = make_broker("amqp://127.0.0.1:0?channelMax=1")
    c = BlockingConnection(bt.url(), timeout=5)
    try:
        assert c.conn.transport.remote_channel_max == 1
    finally:
        c.close()


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x00\x10\x02\x00\x00\x00\x00\x53\x99\x45\x00\x00\x00\x00",  # unknown performative
    b"\x00\x00\x00\x0c\x02\x00\x00\x00\xff\xff\xff\xff",  # undecodable body
    b"\xff\xff\xff\xff" * 4,  # absurd frame size
    b"\x00\x00\x00\x10\x02\x00\x00\x07\x00\x53\x12\x45\x00\x00\x00\x00",  # attach on no session
])
def test_malformed_frames_close_only_that_connection(amqp_broker: Any, url: str,
                                                     garbage: bytes) -> None:
    good = BlockingConnection(url, timeout=5)
    try:
        peer = RawPeer(amqp_broker.address())
        peer.open_amqp()
        peer.send(garbage)
        frames = peer.frames_until_closed()
        cond = close_condition(frames)
        assert cond is not None and cond.startswith("amqp:")
        good.create_sender("queue://ok").send(Message(body="unaffected"))
        assert good.create_receiver("queue://ok", credit=1).receive(timeout=5).body == "unaffected"
    finally:
        good.close()


@pytest.mark.parametrize("header", [b"GET / HTTP/1.1\r\n\r\n", b"AMQP\x01\x01\x00\x00", b"\x16\x03\x01\x00"])
def test_protocol_header_mismatch(amqp_broker: Any, header: bytes) -> None:
    peer = RawPeer(amqp_broker.address())
    peer.send(header)
    reply = peer.read_exact(8)
    assert reply in (AMQP_HEADER, SASL_HEADER)
    assert peer.closed_within(30)  # generous: a bound, not a timing check


def test_connection_close_is_answered(url: str, amqp_broker: Any) -> None:
    c = BlockingConnection(url, timeout=5)
    c.create_receiver("queue://gone", credit=1)
    assert amqp_broker.call(lambda: len(amqp_broker.broker.connections)) == 1
    c.close()
    wait_equal(lambda: amqp_broker.call(lambda: len(amqp_broker.broker.connections)), 0,
               "connections the broker holds after the client closed")


def test_a_producer_held_by_flow_control_can_still_close(make_broker: Any) -> None:
    """Transfers queued behind a full memoryUsage do not hold the close reply for
    ever: past a bound the broker answers the close and releases the connection."""
    from relaymq.config.model import SystemUsageConfig, UsageLimit
    from relaymq.testing import broker_config, wait_until

    bt = make_broker(config=broker_config(
        "amqp://127.0.0.1:0", system_usage=SystemUsageConfig(memory=UsageLimit(limit=100_000))))
    c = BlockingConnection(bt.url(), timeout=60)
    sender = c.create_sender("queue://held.close")
    for _ in range(400):  # unsettled, not awaited: ~400 KB against a 100 KB limit
        sender.link.send(Message(body="x" * 1024))

    def held() -> bool:  # transfers queued behind a send that waits for memory
        return bool(bt.call(lambda: bt.broker.usage.memory.full and any(
            p.conn._sendq for c in bt.broker.connectors for p in c.connections if p.conn)))

    c.wait(held, timeout=30, msg="transfers held by a full memoryUsage")
    c.conn.close()
    # answered within the bound, well before the broker's idle time-out (30 s) would
    # close it (proton raises Timeout), and as a plain close reply
    c.wait(lambda: not (c.conn.state & Endpoint.REMOTE_ACTIVE), timeout=20,
           msg="the close answered")
    assert c.conn.remote_condition is None
    c.close()
    wait_until(lambda: bt.call(lambda: not bt.broker.connections), "the connection released")
    assert 0 < bt.queue_size("held.close") < 400
