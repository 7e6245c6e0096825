"""CONNECT: versions, CONNECTED headers, authentication, client ids, heart-beats."""

from __future__ import annotations

import time

import pytest
import stomp
from relaymq.broker.security import ConnectRequest, Principal
from relaymq.errors import SecurityError
from relaymq.hookspecs import hookimpl
from relaymq.testing.waits import wait_until

from .conftest import BrokerThread, RawClient, connect


@pytest.mark.parametrize(("accept", "version"), [
    ("1.0,1.1,1.2", "1.2"), ("1.1", "1.1"), ("1.0,1.1", "1.1"), ("1.2", "1.2"), (None, "1.0"),
])
def test_version_negotiation(raw, accept: str | None, version: str) -> None:
    c = raw()
    h = c.connect(f"accept-version:{accept}\nhost:localhost\n" if accept else "host:x\n")
    assert h["version"] == version
    assert h["server"].startswith("RelayMQ/")
    assert h["session"]
    assert h["heart-beat"] == "0,0"


def test_connect_receipt_is_answered_on_connected(raw) -> None:
    """ActiveMQ puts a CONNECT's `receipt` (or `request-id`) on CONNECTED as
    `receipt-id` and `response-id`; no separate RECEIPT follows."""
    c = raw()
    h = c.connect("accept-version:1.2\nhost:x\nreceipt:hello\n")
    assert h["receipt-id"] == "hello" and h["response-id"] == "hello"
    c.send("SEND\ndestination:/queue/after.connect\nreceipt:next\n\nx\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "next"})
    d = raw()
    assert d.connect("accept-version:1.1\nhost:x\nrequest-id:7\n")["response-id"] == "7"


def test_connected_session_is_the_client_id(raw) -> None:
    """ActiveMQ's CONNECTED `session` is the client id when CONNECT gave one."""
    c = raw()
    assert c.connect("accept-version:1.2\nhost:x\nclient-id:my-app\n")["session"] == "my-app"
    d = raw()
    assert d.connect()["session"].startswith("ID:")


def test_stomp_command_as_well_as_connect(raw) -> None:
    c = raw()
    c.send("STOMP\naccept-version:1.2\nhost:localhost\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "CONNECTED" and h["version"] == "1.2"


def test_unsupported_version_is_refused_and_closed(raw) -> None:
    c = raw()
    c.send("CONNECT\naccept-version:2.0,3.1\nhost:x\n\n\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR"
    assert h["version"] == "1.0,1.1,1.2"
    assert "message" in h
    assert c.closed()


def test_frames_before_connect_get_error_but_keep_connection(raw) -> None:
    c = raw()
    c.send("SEND\ndestination:/queue/x\nreceipt:r1\n\nhi\x00")
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["receipt-id"] == "r1"
    assert "connect" in h["message"].lower()
    c.send("SUBSCRIBE\ndestination:/queue/x\nid:1\n\n\x00")
    assert c.read()[0] == "ERROR"
    c.connect()  # still open, and CONNECT works
    c.send("SEND\ndestination:/queue/x\nreceipt:r2\n\nhi\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "r2"})


def test_stomp_py_all_versions(server: BrokerThread) -> None:
    for version in ("1.0", "1.1", "1.2"):
        conn, col = connect(server, version)
        if version == "1.0":
            conn.subscribe(f"/queue/v{version}", id="s1", ack="auto")
        else:
            conn.subscribe(f"/queue/v{version}", id="s1", ack="auto")
        conn.send(f"/queue/v{version}", f"hello {version}")
        msgs = col.wait_messages(1)
        assert [m.body for m in msgs] == [f"hello {version}"]
        conn.disconnect()


class RefuseBadPasswords:
    """A test-only authentication plugin: user `alice`, password `secret`."""

    @hookimpl
    def relaymq_authenticate(self, broker, request: ConnectRequest) -> Principal:
        if request.username != "alice" or request.password != "secret":
            raise SecurityError(f"User name [{request.username}] or password is invalid.")
        assert request.transport == "stomp"
        assert request.remote_address and request.remote_address.startswith("127.0.0.1:")
        return Principal("alice")


@pytest.fixture
def secured(start_broker) -> BrokerThread:
    return start_broker(setup=lambda b: b.plugins.register(RefuseBadPasswords()))


def test_login_passcode_through_the_auth_hook(secured: BrokerThread) -> None:
    conn, col = connect(secured, username="alice", passcode="secret")
    conn.send("/queue/auth", "ok", receipt="r")
    assert col.wait_receipt("r")
    conn.disconnect()


@pytest.mark.parametrize("login", ["login:alice\npasscode:wrong\n", "login:bob\npasscode:secret\n", ""])
def test_bad_login_gets_error_and_close(secured: BrokerThread, login: str) -> None:
    c = RawClient(secured)
    try:
        c.send(f"CONNECT\naccept-version:1.2\nhost:x\n{login}\n\x00")
        cmd, h, body = c.read()
        assert cmd == "ERROR"
        assert "invalid" in h["message"]
        assert c.closed()
    finally:
        c.close()


def test_stomp_py_bad_password(secured: BrokerThread) -> None:
    conn = stomp.Connection12([(secured.host, secured.port)], reconnect_attempts_max=1)
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect("alice", "nope", wait=True)
    # the broker answered ERROR and closes the connection
    wait_until(lambda: not conn.is_connected(), "the refused connection to close")


def test_client_id_in_use(raw) -> None:
    a = raw()
    a.connect("accept-version:1.2\nhost:x\nclient-id:app-1\n")
    b = raw()
    b.send("CONNECT\naccept-version:1.2\nhost:x\nclient-id:app-1\n\n\x00")
    cmd, h, _ = b.read()
    assert cmd == "ERROR" and "app-1" in h["message"]
    assert b.closed()
    a.send("SEND\ndestination:/queue/cid\nreceipt:r\n\nx\x00")  # the first is unaffected
    assert a.read()[0] == "RECEIPT"
    a.send("DISCONNECT\nreceipt:bye\n\n\x00")
    assert a.read()[0] == "RECEIPT"
    assert a.closed()
    c = raw()  # released on disconnect
    c.connect("accept-version:1.2\nhost:x\nclient-id:app-1\n")


def test_server_sends_heartbeats(raw) -> None:
    c = raw()
    h = c.connect("accept-version:1.2\nhost:x\nheart-beat:0,50\n")
    assert h["heart-beat"] == "50,0"
    deadline = time.monotonic() + 20
    while c.buf.count(b"\n") < 5:  # five heart-beats, however long a loaded machine takes
        if time.monotonic() >= deadline:  # a bounded wait, not a timing check
            raise AssertionError(f"only {c.buf!r} within 20 s")
        c.sock.settimeout(max(deadline - time.monotonic(), 0.01))
        c.buf += c.sock.recv(4096)
    assert set(c.buf) == {10}


def test_silent_client_is_dropped(raw) -> None:
    c = raw()
    h = c.connect("accept-version:1.2\nhost:x\nheart-beat:100,0\n")
    assert h["heart-beat"] == "0,100"
    cmd, h, _ = c.read(timeout=20)  # raises if the broker never drops it
    assert cmd == "ERROR" and "heart-beat" in h["message"]
    assert c.closed()


def test_client_sending_heartbeats_stays(raw) -> None:
    c = raw()
    # a heart-beat every 200 ms against a 1 s interval: a margin a loaded machine keeps
    # (at 70 ms against 100 ms, one late wake-up got the client dropped)
    c.connect("accept-version:1.2\nhost:x\nheart-beat:1000,0\n")
    for _ in range(8):
        time.sleep(0.2)
        c.send(b"\n")
    c.send("SEND\ndestination:/queue/hb\nreceipt:r\n\nx\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "r"})


def test_stomp_py_heartbeats_both_ways(server: BrokerThread) -> None:
    # 500 ms beats, several of them: short enough to matter, long enough for a busy CI host
    conn, col = connect(server, "1.2", heartbeats=(500, 500))
    conn.subscribe("/queue/hb2", id="1")
    # idle through several beats: the broker's reach the client, the client's keep it
    assert col.wait(lambda: col.heartbeats >= 5, timeout=30), col.heartbeats
    assert conn.is_connected()
    conn.send("/queue/hb2", "still here")
    assert [m.body for m in col.wait_messages(1)] == ["still here"]
    conn.disconnect()


def test_default_heartbeat_option(start_broker) -> None:
    bt = start_broker("stomp://127.0.0.1:0?transport.defaultHeartBeat=100,0")
    c = RawClient(bt)
    try:
        h = c.connect("accept-version:1.2\nhost:x\n")
        assert h["heart-beat"] == "0,100"
        assert c.read(timeout=3)[0] == "ERROR"
        assert c.closed()
    finally:
        c.close()


def test_invalid_heartbeat_header(raw) -> None:
    c = raw()
    c.send("CONNECT\naccept-version:1.2\nhost:x\nheart-beat:fast\n\n\x00")
    assert c.read()[0] == "ERROR"
    assert c.closed()


def test_connect_timeout(start_broker) -> None:
    bt = start_broker("stomp://127.0.0.1:0?transport.connectAttemptTimeout=100")
    c = RawClient(bt)
    try:
        cmd, h, _ = c.read(timeout=3)
        assert cmd == "ERROR" and "CONNECT" in h["message"]
        assert c.closed()
    finally:
        c.close()


def test_maximum_connections(start_broker) -> None:
    bt = start_broker("stomp://127.0.0.1:0?maximumConnections=1")
    a, b = RawClient(bt), RawClient(bt)
    try:
        a.connect()
        assert b.closed()
    finally:
        a.close()
        b.close()


def test_stomp_nio_scheme(start_broker) -> None:
    bt = start_broker("stomp+nio://127.0.0.1:0")
    conn, col = connect(bt)
    conn.subscribe("/queue/nio", id="1")
    conn.send("/queue/nio", "nio")
    assert [m.body for m in col.wait_messages(1)] == ["nio"]
    conn.disconnect()
