"""The permission matrix over AMQP (python-qpid-proton, real sockets), SASL refusals."""

from __future__ import annotations

from typing import Any

import pytest
from proton import ConnectionException, Message
from proton.utils import BlockingConnection, LinkDetached, SendException

from .conftest import audit_lines
from .matrix import CREATE, ENC_KEY, MATRIX, PASSWORDS, plugins


@pytest.fixture
def bt(start: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)
    return start(plugins())


def amqp(bt: Any, user: str | None, password: str | None = None, **kw: Any) -> BlockingConnection:
    host, port = bt.address("amqp")
    if user is None:
        return BlockingConnection(f"amqp://{host}:{port}", timeout=5, allowed_mechs="ANONYMOUS",
                                  **kw)
    return BlockingConnection(f"amqp://{host}:{port}", timeout=5, user=user, password=password,
                              allowed_mechs="PLAIN", **kw)


def _create(bt: Any, dest: str) -> None:
    from relaymq.model.destination import Destination

    d = Destination.parse(dest)
    bt.run(bt.broker.region.queue(d) if d.is_queue else bt.broker.region.topic(d))


def _attempt(conn: BlockingConnection, operation: str, dest: str) -> None:
    if operation == "send":
        conn.create_sender(dest).send(Message(body="x"))
    else:
        options = None
        if operation == "browse":
            from proton.reactor import Copy
            options = Copy()
        conn.create_receiver(dest, credit=1, options=options)


@pytest.mark.parametrize(("user", "operation", "dest", "allowed"), MATRIX,
                         ids=[f"{u}-{o}-{d}" for u, o, d, _ in MATRIX])
def test_permission_matrix(bt: Any, user: str, operation: str, dest: str, allowed: bool) -> None:
    _create(bt, dest)
    conn = amqp(bt, user, PASSWORDS[user])
    try:
        if allowed:
            _attempt(conn, operation, dest)
            return
        with pytest.raises((LinkDetached, SendException)) as refused:
            _attempt(conn, operation, dest)
        text = str(refused.value)
        verb = "write to" if operation == "send" else "read from"
        assert "amqp:unauthorized-access" in text
        assert f"User {user} is not authorized to {verb}: {dest}" in text
        # the link was refused, the connection goes on
        _attempt(conn, "consume", "topic://ActiveMQ.Advisory.Probe" if user != "admin"
                 else "queue://payments")
    finally:
        conn.close()


@pytest.mark.parametrize(("user", "operation", "dest", "allowed"), CREATE)
def test_creating_a_destination_needs_admin(bt: Any, user: str, operation: str, dest: str,
                                            allowed: bool) -> None:
    conn = amqp(bt, user, PASSWORDS[user])
    try:
        if allowed:
            _attempt(conn, operation, dest)
            return
        with pytest.raises((LinkDetached, SendException),
                           match=f"User {user} is not authorized to create: {dest}"):
            _attempt(conn, operation, dest)
    finally:
        conn.close()


def test_messages_flow_between_allowed_users(bt: Any) -> None:
    app, reader = amqp(bt, "app", "mypassword"), amqp(bt, "reader", "readerpw")
    try:
        app.create_sender("queue://orders.amqp").send(Message(body="hello"))
        assert reader.create_receiver("queue://orders.amqp", credit=1).receive(timeout=5).body \
            == "hello"
    finally:
        app.close()
        reader.close()


def test_dynamic_temporary_queue_follows_the_temp_entry(bt: Any) -> None:
    app = amqp(bt, "app", "mypassword")
    reader = amqp(bt, "reader", "readerpw")
    try:
        receiver = app.create_receiver(None, dynamic=True, credit=1)
        address = receiver.link.remote_source.address
        app.create_sender(address).send(Message(body="reply"))
        assert receiver.receive(timeout=5).body == "reply"
        with pytest.raises(LinkDetached, match="not authorized to create: temp-queue://"):
            reader.create_receiver(None, dynamic=True, credit=1)
    finally:
        app.close()
        reader.close()


@pytest.mark.parametrize(("user", "password"), [
    ("app", "Wr0ng-Passw0rd"), ("nobody", "mypassword"), (None, None)])
def test_refused_logins(bt: Any, audit: Any, user: str | None, password: str | None) -> None:
    with pytest.raises(ConnectionException) as refused:
        amqp(bt, user, password)
    assert "amqp:unauthorized-access" in str(refused.value)  # sasl-outcome code 1 (auth)
    failed = [line for line in audit_lines(audit) if line.startswith("login-failed")]
    assert len(failed) == 1 and "transport=amqp" in failed[0]
    # the broker goes on serving others
    ok = amqp(bt, "app", "mypassword")
    ok.close()


def test_anonymous_allowed(start: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)
    bt = start(plugins(anonymous=True, authorization=False))
    conn = amqp(bt, None)
    try:
        conn.create_sender("queue://anything").send(Message(body="x"))
        assert conn.create_receiver("queue://anything", credit=1).receive(timeout=5).body == "x"
    finally:
        conn.close()
