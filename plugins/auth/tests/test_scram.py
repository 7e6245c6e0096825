"""AMQP SASL SCRAM-SHA-256/512 against the broker over a real socket.

python-qpid-proton is built without Cyrus SASL (no SCRAM on the client side), so
the test speaks the SASL layer itself (RFC 5802 client, frames from relaymq-amqp's
encoder) and then hands over to AMQP: the broker must answer the AMQP header.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
from typing import Any

import pytest
from relaymq_amqp.encode import frame, performative
from relaymq_amqp.sasl import (
    AMQP_HEADER,
    SASL_CHALLENGE,
    SASL_HEADER,
    SASL_INIT,
    SASL_MECHANISMS,
    SASL_OUTCOME,
    SASL_RESPONSE,
    _frame,
)
from relaymq_amqp.types import Symbol

from .conftest import audit_lines
from .matrix import ENC_KEY, plugins

HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@pytest.fixture
def bt(start: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)
    return start(plugins(authorization=False))


class SaslPeer:
    def __init__(self, bt: Any) -> None:
        self.sock = socket.create_connection(bt.address("amqp"), timeout=10)
        self.buf = bytearray()
        self.sock.sendall(SASL_HEADER)
        assert self._read(8) == SASL_HEADER
        code, fields = self.frame()
        assert code == SASL_MECHANISMS
        self.mechanisms = [str(m) for m in fields[0]] if isinstance(fields[0], list) \
            else [str(fields[0])]

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def frame(self) -> tuple[int, list[Any]]:
        while True:
            got = _frame(self.buf)
            if got is not None:
                return got
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    def send(self, code: int, fields: list[Any]) -> None:
        self.sock.sendall(frame(performative(code, fields), 1))


def scram_login(bt: Any, mechanism: str, user: str, password: str,
                tamper: bool = False) -> tuple[int, SaslPeer]:
    """Run the exchange; returns the outcome code (0 = ok) and the peer."""
    peer = SaslPeer(bt)
    assert mechanism in peer.mechanisms
    h = HASH[mechanism]
    cnonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={cnonce}"
    peer.send(SASL_INIT, [Symbol(mechanism), f"n,,{bare}".encode(), None])
    code, fields = peer.frame()
    if code == SASL_OUTCOME:
        return int(fields[0]), peer
    assert code == SASL_CHALLENGE
    server_first = bytes(fields[0]).decode()
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    assert attrs["r"].startswith(cnonce)
    salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored = hashlib.new(h, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored, auth_message, h).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    if tamper:
        proof = bytes([proof[0] ^ 1]) + proof[1:]
    peer.send(SASL_RESPONSE, [f"{without_proof},p={base64.b64encode(proof).decode()}".encode()])
    code, fields = peer.frame()
    assert code == SASL_OUTCOME
    outcome = int(fields[0])
    if outcome == 0:
        server_key = hmac.new(salted, b"Server Key", h).digest()
        expected = hmac.new(server_key, auth_message, h).digest()
        assert bytes(fields[1]) == b"v=" + base64.b64encode(expected), "server signature"
    return outcome, peer


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_then_amqp(bt: Any, audit: Any, mechanism: str) -> None:
    outcome, peer = scram_login(bt, mechanism, "app", "mypassword")  # an ENC(...) password
    try:
        assert outcome == 0
        peer.sock.sendall(AMQP_HEADER)
        assert peer._read(8) == AMQP_HEADER  # the AMQP layer took over
    finally:
        peer.sock.close()
    assert any(line.startswith("login user=app") and f"method={mechanism}" in line
               for line in audit_lines(audit))


@pytest.mark.parametrize(("user", "password", "tamper"), [
    ("app", "Wr0ng-Passw0rd", False),   # wrong password: wrong proof
    ("app", "mypassword", True),        # a tampered proof
    ("nobody", "mypassword", False),    # unknown user: refused the same way
    ("reader", "readerpw", False),      # a $scrypt$ hash: no SCRAM keys
])
def test_scram_refusals(bt: Any, audit: Any, user: str, password: str, tamper: bool) -> None:
    outcome, peer = scram_login(bt, "SCRAM-SHA-256", user, password, tamper)
    peer.sock.close()
    assert outcome == 1
    failed = [line for line in audit_lines(audit) if line.startswith("login-failed")]
    assert len(failed) == 1 and f"user={user}" in failed[0]


def test_malformed_scram_messages_close_only_that_connection(bt: Any) -> None:
    peer = SaslPeer(bt)
    peer.send(SASL_INIT, [Symbol("SCRAM-SHA-256"), b"p=tls-unique,,n=app,r=x", None])
    code, fields = peer.frame()
    assert code == SASL_OUTCOME and int(fields[0]) == 1
    peer.sock.close()
    outcome, ok = scram_login(bt, "SCRAM-SHA-256", "admin", "adminpw")
    ok.sock.close()
    assert outcome == 0


def test_no_scram_without_an_authentication_plugin(start: Any) -> None:
    bt = start("")
    peer = SaslPeer(bt)
    peer.sock.close()
    assert not any(m.startswith("SCRAM") for m in peer.mechanisms)
