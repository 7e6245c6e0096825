"""Bad input against an authenticating broker: floods of failed logins from one
address, a CONNECT with 10,000 headers, oversized SASL frames. Only the offending
connections fail; everyone else, and every accepted message, is unaffected."""

from __future__ import annotations

import os
import resource
import socket
import struct
import threading
import time
from typing import Any

import pytest
from proton import Message
from proton.utils import BlockingConnection

from .matrix import ENC_KEY, plugins


@pytest.fixture
def bt(start: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)
    return start(plugins(authorization=False))


def _raw_connect(bt: Any, login: str, passcode: str, source: str = "127.0.0.1",
                 extra: str = "") -> socket.socket:
    host, port = bt.address("stomp")
    s = socket.create_connection((host, port), timeout=10, source_address=(source, 0))
    s.sendall(f"CONNECT\naccept-version:1.2\nhost:x\nlogin:{login}\npasscode:{passcode}\n"
              f"{extra}\n\x00".encode())
    return s


def _read_frame(s: socket.socket) -> bytes:
    data = b""
    while b"\x00" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _wait(pred: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def _flood_budget() -> int:
    """How many flood connections this process can hold: the broker runs in the
    test's own process, so each costs two descriptors (the client's and the
    accepted one), and the rest of the test needs some left over."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    return max(0, min(5_000, (soft - in_use - 256) // 2))


@pytest.fixture
def fd_limit_raised() -> Any:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
@pytest.mark.usefixtures("fd_limit_raised")
def test_failed_login_flood_slows_only_that_address(bt: Any, stomp_client: Any) -> None:
    # a producer and a consumer that were connected before the flood
    consumer = stomp_client(bt, "admin", "adminpw")
    assert consumer.subscribe("/queue/steady") == "receipt"
    producer = stomp_client(bt, "app", "mypassword")
    flood: list[socket.socket] = []
    sent = 0
    stop = threading.Event()
    budget = _flood_budget()
    assert budget >= 100, f"only {budget} descriptors to spare for the flood"

    def attack() -> None:
        while not stop.is_set() and len(flood) < budget:
            try:
                flood.append(_raw_connect(bt, "app", f"guess-{len(flood)}"))
            except OSError:
                time.sleep(0.01)

    attacker = threading.Thread(target=attack, daemon=True)
    attacker.start()
    try:
        service = bt.broker.extensions["auth"]
        _wait(lambda: bt.call(lambda: service.throttle.failures("127.0.0.1")) >= 6)
        # keep sending while the flood goes on; every send is receipted
        for i in range(300):
            assert producer.send("/queue/steady", f"m{i}") == "receipt"
            sent += 1
        # a login from another address is not slowed: it completes while the flood's
        # attempts still wait their turn
        other = socket.create_connection(bt.address("stomp"), timeout=10,
                                         source_address=("127.0.0.2", 0))
        other.sendall(b"CONNECT\naccept-version:1.2\nhost:x\nlogin:admin\npasscode:adminpw\n\n\x00")
        assert _read_frame(other).startswith(b"CONNECTED\n")
        other.close()
        waiting = bt.call(lambda: service.throttle._hosts["127.0.0.1"].users)
        assert waiting > 0, "the flood's logins should still be queued behind their delays"
    finally:
        stop.set()
        attacker.join(30)
        for s in flood:
            s.close()
    consumer.col.wait(lambda: len(consumer.col.messages) >= sent, timeout=20)
    assert [m.body for m in consumer.col.messages] == [f"m{i}" for i in range(sent)]
    assert producer.connected and consumer.connected
    # the address's real user gets in once the flood stopped and its penalty expired
    bt.call(lambda: service.throttle.succeeded("127.0.0.1"))
    assert stomp_client(bt, "app", "mypassword").connected


def test_connect_with_ten_thousand_headers_is_refused(bt: Any, stomp_client: Any) -> None:
    extra = "".join(f"h{i}:v\n" for i in range(10_000))
    s = _raw_connect(bt, "app", "mypassword", extra=extra)
    try:
        frame = _read_frame(s)
    except ConnectionResetError:
        frame = b""
    finally:
        s.close()
    assert not frame.startswith(b"CONNECTED")
    assert stomp_client(bt, "app", "mypassword").send("/queue/after") == "receipt"


def test_oversized_and_garbage_sasl_frames_close_only_that_connection(bt: Any) -> None:
    host, port = bt.address("amqp")
    for payload in (struct.pack(">IBB", 10_000_000, 2, 1) + b"\x00" * 1024,
                    struct.pack(">IBBH", 4, 2, 1, 0)):  # a size below the header
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(b"AMQP\x03\x01\x00\x00")
            s.recv(1024)  # our header and sasl-mechanisms
            s.sendall(payload)
            rest = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                rest += chunk
            assert b"\x00\x53\x44" not in rest  # no sasl-outcome: just closed
    conn = BlockingConnection(f"amqp://{host}:{port}", timeout=5, user="app",
                              password="mypassword", allowed_mechs="PLAIN")
    try:
        conn.create_sender("queue://after").send(Message(body="fine"))
    finally:
        conn.close()


def test_an_unknown_user_is_checked_at_the_cost_of_the_real_hashes() -> None:
    """A login as a name that does not exist runs scrypt at the cost the table's
    hashes have, so its time does not tell which names exist (it ran at ln=10
    while the users' hashes were ln=14)."""
    from relaymq.broker.security import Principal  # noqa: F401 - the table's result type
    from relaymq_auth.authn import LoginFailed
    from relaymq_auth.passwords import hash_password, parse
    from relaymq_auth.users import User, UserTable, _dummy

    table = UserTable({name: User(name, parse(hash_password("pw", ln=12)), frozenset())
                       for name in ("a", "b")} | {"c": User("c", parse("plain"), frozenset())})
    assert table.usual_cost == (12, 8, 1)
    assert _dummy(table.usual_cost).cost == (12, 8, 1)
    with pytest.raises(LoginFailed, match="unknown user"):
        table.check("nobody", "pw")
    assert table.check("a", "pw").name == "a"


def test_passwd_refuses_a_cost_no_stored_hash_may_have() -> None:
    from click.testing import CliRunner
    from relaymq.cli import main

    result = CliRunner().invoke(main, ["passwd", "--password-stdin", "--cost", "19"], input="pw\n")
    assert result.exit_code == 2 and "19 is not in the range 10<=x<=18" in result.output, result.output
    ok = CliRunner().invoke(main, ["passwd", "--password-stdin", "--cost", "10"], input="pw\n")
    assert ok.exit_code == 0 and ok.output.startswith("$scrypt$ln=10,r=8,p=1$"), ok.output
