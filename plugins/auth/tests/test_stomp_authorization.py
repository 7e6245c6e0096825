"""The permission matrix over STOMP (stomp.py, real sockets), and login refusals."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import audit_lines
from .matrix import CREATE, ENC_KEY, MATRIX, PASSWORDS, plugins

STOMP_NAME = {"queue": "/queue/", "topic": "/topic/"}
#: something each user may send to (admins are not in 'everyone' in this config)
ALLOWED_SEND = {"admin": "/queue/payments", "app": "/topic/ActiveMQ.Advisory.Probe",
                "reader": "/topic/ActiveMQ.Advisory.Probe"}


def stomp_dest(dest: str) -> str:
    kind, name = dest.split("://")
    return STOMP_NAME[kind] + name


@pytest.fixture
def bt(start: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)
    return start(plugins())


def _create(bt: Any, dest: str) -> None:
    from relaymq.model.destination import Destination

    d = Destination.parse(dest)
    bt.run(bt.broker.region.queue(d) if d.is_queue else bt.broker.region.topic(d))


@pytest.mark.parametrize(("user", "operation", "dest", "allowed"), MATRIX,
                         ids=[f"{u}-{o}-{d}" for u, o, d, _ in MATRIX])
def test_permission_matrix(bt: Any, stomp_client: Any, audit: Any, user: str, operation: str,
                           dest: str, allowed: bool) -> None:
    _create(bt, dest)
    client = stomp_client(bt, user, PASSWORDS[user])
    if operation == "send":
        outcome = client.send(stomp_dest(dest))
    else:
        headers = {"browser": "true"} if operation == "browse" else {}
        outcome = client.subscribe(stomp_dest(dest), **headers)
    if allowed:
        assert outcome == "receipt"
        return
    verb = "write to" if operation == "send" else "read from"
    assert outcome is not None and outcome != "receipt"
    assert outcome.headers["message"] == f"User {user} is not authorized to {verb}: {dest}"
    # only that frame failed: the connection still works for what the user may do
    assert client.connected
    assert client.send(ALLOWED_SEND[user]) == "receipt"
    action = "write" if operation == "send" else "read"
    assert f"denied user={user} action={action} destination={dest} transport=stomp" \
           in " | ".join(audit_lines(audit))


@pytest.mark.parametrize(("user", "operation", "dest", "allowed"), CREATE)
def test_creating_a_destination_needs_admin(bt: Any, stomp_client: Any, audit: Any, user: str,
                                            operation: str, dest: str, allowed: bool) -> None:
    client = stomp_client(bt, user, PASSWORDS[user])
    act = client.send if operation == "send" else client.subscribe
    outcome = act(stomp_dest(dest))
    if allowed:
        assert outcome == "receipt"
        assert f"create user={user} destination={dest}" in " | ".join(audit_lines(audit))
        return
    assert outcome.headers["message"] == f"User {user} is not authorized to create: {dest}"
    assert bt.call(lambda: dest not in bt.broker.destination_stats())
    _create(bt, dest)  # once it exists, using it needs read or write only
    assert act(stomp_dest(dest)) == "receipt"


def test_messages_flow_between_allowed_users(bt: Any, stomp_client: Any) -> None:
    app = stomp_client(bt, "app", "mypassword")
    assert app.send("/queue/orders.flow", "first") == "receipt"
    reader = stomp_client(bt, "reader", "readerpw")
    assert reader.subscribe("/queue/orders.flow") == "receipt"
    assert reader.col.wait(lambda: len(reader.col.messages) == 1)
    assert reader.col.messages[0].body == "first"


def test_temporary_destinations_follow_the_temp_entry(bt: Any, stomp_client: Any) -> None:
    app = stomp_client(bt, "app", "mypassword")
    assert app.subscribe("/temp-queue/replies") == "receipt"
    assert app.send("/temp-queue/replies", "back") == "receipt"
    assert app.col.wait(lambda: [m.body for m in app.col.messages] == ["back"])
    reader = stomp_client(bt, "reader", "readerpw")
    refused = reader.subscribe("/temp-queue/mine")
    assert refused != "receipt"
    assert refused.headers["message"].startswith("User reader is not authorized to create: temp-queue://")


@pytest.mark.parametrize(("login", "passcode", "message"), [
    ("app", "Wr0ng-Passw0rd", "User name [app] or password is invalid."),
    ("nobody", "mypassword", "User name [nobody] or password is invalid."),
    (None, None, "User name [null] or password is invalid."),
    ("reader", "mypassword", "User name [reader] or password is invalid."),
])
def test_bad_logins_get_an_error_and_are_disconnected(bt: Any, stomp_client: Any, audit: Any,
                                                      login: str | None, passcode: str | None,
                                                      message: str) -> None:
    client = stomp_client(bt, login, passcode, wait=False)
    error = client.col.wait_error()
    assert error is not None and error.headers["message"] == message
    assert client.col.wait(lambda: client.col.disconnected)
    failed = [line for line in audit_lines(audit) if line.startswith("login-failed")]
    assert len(failed) == 1 and f"user={login or '-'}" in failed[0]
    if passcode is not None:
        assert passcode not in " ".join(audit_lines(audit))


def test_successful_login_is_audited_without_the_password(bt: Any, stomp_client: Any,
                                                          audit: Any) -> None:
    stomp_client(bt, "app", "mypassword")
    lines = [line for line in audit_lines(audit) if line.startswith("login ")]
    assert len(lines) == 1
    assert "user=app groups=apps,everyone transport=stomp remote=127.0.0.1:" in lines[0]
    assert "mypassword" not in " ".join(audit_lines(audit))


def test_anonymous_access_when_allowed(start: Any, stomp_client: Any,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)
    bt = start(plugins(anonymous=True).replace(
        'topic="events.*" read="everyone" write="apps" admin="everyone"',
        'topic="events.*" read="everyone,anonymous" write="apps" admin="everyone,anonymous"'))
    anon = stomp_client(bt)
    assert anon.subscribe("/topic/events.public") == "receipt"
    refused = anon.send("/topic/events.public")
    assert refused.headers["message"] == "User anonymous is not authorized to write to: topic://events.public"
    # a wrong password is still refused: anonymous access is for clients that give none
    bad = stomp_client(bt, "app", "wrong", wait=False)
    assert bad.col.wait_error().headers["message"] == "User name [app] or password is invalid."


def test_advisories_reach_allowed_readers_only(bt: Any, stomp_client: Any) -> None:
    reader = stomp_client(bt, "reader", "readerpw")
    assert reader.subscribe("/topic/ActiveMQ.Advisory.Queue") == "receipt"
    # the broker's own advisory publications are never refused
    app = stomp_client(bt, "app", "mypassword")
    assert app.send("/queue/orders.advised") == "receipt"
    assert reader.col.wait(lambda: any("orders.advised" in m.body for m in reader.col.messages))


def test_a_wildcard_destination_needs_the_permission_on_every_name_it_reaches(
        bt: Any, stomp_client: Any) -> None:
    """`events.*` (apps may write, everyone read) is one segment: a send to
    `events.>` would also reach `events.a.b`, which only admins may write."""
    for name in ("events.created", "events.a.b"):
        _create(bt, f"topic://{name}")
    admin = stomp_client(bt, "admin", "adminpw")
    assert admin.subscribe("/topic/events.a.b") == "receipt"
    app = stomp_client(bt, "app", "mypassword")
    refused = app.send("/topic/events.>", "via-wildcard")
    assert refused != "receipt"
    assert refused.headers["message"] == "User app is not authorized to write to: topic://events.>"
    assert app.connected and app.send("/topic/events.*", "one-segment") == "receipt"
    assert app.send("/topic/events.a.b", "direct") != "receipt"
    reader = stomp_client(bt, "reader", "readerpw")
    assert reader.subscribe("/topic/events.>") != "receipt"
    assert reader.subscribe("/topic/events.*") == "receipt"
    # nothing the app sent reached the admins-only topic
    assert admin.send("/topic/events.a.b", "admin-own") == "receipt"
    admin.col.wait_messages(1)
    assert admin.col.bodies() == ["admin-own"]


def test_a_wildcard_send_with_most_specific_wins(start: Any, stomp_client: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """orders.> lets apps write, orders.audit is admins': a wildcard over both is
    refused, one below orders.> that misses orders.audit is not (the catch-all
    `>` entry is less specific than orders.> and decides none of those names)."""
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)
    bt = start(plugins().replace("<authorizationMap>", '<authorizationMap mostSpecificWins="true">'))
    for name in ("orders.audit", "orders.eu.new"):
        _create(bt, f"queue://{name}")
    app = stomp_client(bt, "app", "mypassword")
    assert app.send("/queue/orders.audit") != "receipt"
    for wildcard in ("/queue/orders.>", "/queue/orders.*", "/queue/>"):
        assert app.send(wildcard) != "receipt", wildcard
    assert app.send("/queue/orders.eu.*", "eu") == "receipt"
    assert bt.call(lambda: bt.broker.destination_stats()["queue://orders.audit"]["enqueued"]) == 0
    assert bt.call(lambda: bt.broker.destination_stats()["queue://orders.eu.new"]["enqueued"]) == 1
