"""Logins and sessions over real HTTP, each against a broker process of its own (these
tests block 127.0.0.1's logins on purpose, and change users, which would disturb the
shared broker's other tests): the failed-login throttle and its `Retry-After`, whose
address X-Forwarded-For may name, and sessions of users the configuration removes or
demotes."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from relaymq.testing import wait_until
from relaymq.testing.processes import RelaymqProcess

from .conftest import ADMIN, VIEWER, ConsoleBroker, free_port

#: seconds failed logins are counted over (`loginFailureWindow`): short, so a test can
#: wait for the block to end
WINDOW = 4


@pytest.fixture
def throttled(tmp_path: Path) -> Iterator[ConsoleBroker]:
    broker = ConsoleBroker(tmp_path, f'loginFailureWindow="{WINDOW}"')
    yield broker
    broker.stop()


def login(broker: ConsoleBroker, password: str, **headers: str) -> httpx.Response:
    return httpx.post(f"{broker.url}/login", data={"username": ADMIN[0], "password": password},
                      headers=headers, follow_redirects=False, timeout=30)


def test_a_blocked_address_is_told_when_to_try_again_and_then_logs_in(throttled) -> None:
    for _ in range(5):
        assert login(throttled, "wrong").status_code == 401
    # blocked: even the right password is refused (guessing stays throttled), with the
    # seconds to wait in Retry-After and on the login page
    blocked = login(throttled, ADMIN[1])
    assert blocked.status_code == 429, blocked.text
    wait = int(blocked.headers["retry-after"])
    assert 1 <= wait <= WINDOW
    assert "too many failed logins from this address" in blocked.text
    assert f"try again in {wait} second" in blocked.text
    api = httpx.get(f"{throttled.url}/api/v1/queues", auth=ADMIN, timeout=30)
    assert api.status_code == 429 and 1 <= int(api.headers["retry-after"]) <= WINDOW, api.text
    # once the window has passed, the right password logs in
    wait_until(lambda: login(throttled, ADMIN[1]).status_code == 303,
               "the right password to log in once the window has passed", 30, interval=0.25)
    assert httpx.get(f"{throttled.url}/api/v1/queues", auth=ADMIN, timeout=30).status_code == 200


def test_a_concurrent_burst_of_wrong_logins_is_held_to_the_limit(tmp_path: Path) -> None:
    """20 wrong passwords from one address at once, at /login and with Basic
    credentials: only 5 are checked (401, one audit line each); the others are
    refused unchecked with 429, as if they had come one after another."""
    broker = ConsoleBroker(tmp_path)

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=broker.url, timeout=30) as client:
            forms = [client.post("/login", data={"username": ADMIN[0], "password": f"w{i}"})
                     for i in range(10)]
            basic = [client.get("/api/v1/queues", auth=(ADMIN[0], f"b{i}")) for i in range(10)]
            return list(await asyncio.gather(*forms, *basic))

    try:
        answers = asyncio.run(burst())
        statuses = sorted(r.status_code for r in answers)
        assert statuses == [401] * 5 + [429] * 15, statuses
        wait_until(lambda: len(audit_lines(broker, "login-failed")) >= 5, "the audit lines")
        failed = audit_lines(broker, "login-failed")
        assert len(failed) == 5, failed
        assert login(broker, ADMIN[1]).status_code == 429  # blocked, the right password too
    finally:
        broker.stop()


def audit_lines(broker: ConsoleBroker, start: str) -> list[str]:
    return [line.partition("relaymq.audit: ")[2] for line in broker.output().splitlines()
            if f"relaymq.audit: {start}" in line]


def test_x_forwarded_for_is_not_trusted_without_trusted_proxies(tmp_path: Path) -> None:
    """By default the address a request came from is the peer's: a client on the same
    machine cannot pick another address for the audit log or the login throttle."""
    broker = ConsoleBroker(tmp_path, f'loginFailureWindow="{WINDOW}"')
    try:
        made = httpx.post(f"{broker.url}/api/v1/queues", json={"name": "login.audited"},
                          auth=ADMIN, headers={"X-Forwarded-For": "203.0.113.7"}, timeout=30)
        assert made.status_code == 200, made.text
        created = wait_until(lambda: audit_lines(broker, "create user=ops"), "the audit line")
        assert created[0].endswith("destination=queue://login.audited transport=http "
                                   "remote=127.0.0.1"), created
        # five failures, each "from" another address, still block 127.0.0.1
        for i in range(5):
            refused = login(broker, "wrong", **{"X-Forwarded-For": f"198.51.100.{i}"})
            assert refused.status_code == 401
        blocked = login(broker, ADMIN[1], **{"X-Forwarded-For": "198.51.100.99"})
        assert blocked.status_code == 429 and blocked.headers["retry-after"], blocked.text
        failed = audit_lines(broker, "login-failed")
        assert len(failed) == 5 and all("remote=127.0.0.1 " in f for f in failed), failed
        assert "203.0.113.7" not in broker.output() and "198.51.100." not in broker.output()
    finally:
        broker.stop()


def test_a_trusted_proxy_names_the_client_in_x_forwarded_for(tmp_path: Path) -> None:
    """With `trustedProxies`, a request from one of them is from the address its
    X-Forwarded-For names: clients behind the proxy are throttled and audited apart."""
    broker = ConsoleBroker(tmp_path, f'loginFailureWindow="{WINDOW}" '
                                     'trustedProxies="192.0.2.10, 127.0.0.0/8"')
    try:
        for _ in range(5):
            assert login(broker, "wrong", **{"X-Forwarded-For": "198.51.100.1"}).status_code == 401
        blocked = login(broker, ADMIN[1], **{"X-Forwarded-For": "198.51.100.1"})
        assert blocked.status_code == 429, blocked.text
        other = login(broker, ADMIN[1], **{"X-Forwarded-For": "198.51.100.2"})
        assert other.status_code == 303, other.text  # another client behind the proxy
        assert login(broker, ADMIN[1]).status_code == 303  # the proxy's own address
        failed = audit_lines(broker, "login-failed")
        assert len(failed) == 5 and all("remote=198.51.100.1 " in f for f in failed), failed
        logins = wait_until(lambda: audit_lines(broker, "login user=ops"), "the login lines")
        assert "remote=198.51.100.2 " in logins[0], logins
    finally:
        broker.stop()


def logged_in(broker: ConsoleBroker, who: tuple[str, str]) -> tuple[httpx.Client, str]:
    """A client with `who`'s session cookie, and the session's CSRF token."""
    client = httpx.Client(base_url=broker.url, follow_redirects=False, timeout=30)
    assert client.post("/login", data={"username": who[0], "password": who[1]}).status_code == 303
    page = client.get("/queues")
    assert page.status_code == 200, page.text
    return client, page.text.split('name="csrf" value="')[1].split('"')[0]


def reload_users(broker: ConsoleBroker, edits: dict[str, str]) -> None:
    """Edit the `<authenticationUser>` elements of the broker's configuration and have
    it re-read it (SIGHUP), waiting until relaymq-auth says it applied them."""
    text = broker.config.read_text()
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    broker.config.write_text(text)
    applied = broker.output().count("<simpleAuthenticationPlugin> applied")
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: broker.output().count("<simpleAuthenticationPlugin> applied") > applied,
               "the configuration reload", detail=broker.output)


def test_a_session_ends_when_its_user_is_removed_or_leaves_the_console_groups(
        tmp_path: Path) -> None:
    broker = ConsoleBroker(tmp_path)
    try:
        ops, ops_csrf = logged_in(broker, ADMIN)
        watcher, _ = logged_in(broker, VIEWER)
        assert watcher.get("/api/v1/queues").status_code == 200
        made = ops.post("/api/v1/queues", json={"name": "login.before"},
                        headers={"X-CSRF-Token": ops_csrf})
        assert made.status_code == 200, made.text
        # the viewer's group no longer grants the console; the admin is only a viewer now
        reload_users(broker, {
            f'username="{VIEWER[0]}" password="{VIEWER[1]}" groups="users"':
                f'username="{VIEWER[0]}" password="{VIEWER[1]}" groups="apps"',
            f'username="{ADMIN[0]}" password="{ADMIN[1]}" groups="admins"':
                f'username="{ADMIN[0]}" password="{ADMIN[1]}" groups="users"'})
        refused = watcher.get("/api/v1/queues")
        assert refused.status_code == 401, refused.text
        assert watcher.get("/queues").headers.get("location") == "/login"  # the page: log in
        assert ops.get("/api/v1/queues").status_code == 200
        demoted = ops.post("/api/v1/queues", json={"name": "login.after"},
                           headers={"X-CSRF-Token": ops_csrf})
        assert demoted.status_code == 403 and "may only view" in demoted.json()["error"]
        assert ops.get("/api/v1/queues/login.after").status_code == 404  # nothing made
        # the user is removed from the users altogether
        reload_users(broker, {
            f'<authenticationUser username="{ADMIN[0]}" password="{ADMIN[1]}" groups="users"/>':
                ""})
        assert ops.get("/api/v1/queues").status_code == 401
        assert ops.get("/").headers.get("location") == "/login"
        listed = httpx.get(f"{broker.url}/api/v1/queues", auth=VIEWER, timeout=30)
        assert listed.status_code == 403  # a new login sees the new groups too
    finally:
        broker.stop()


def test_a_session_ends_when_its_user_leaves_a_reloaded_users_properties(tmp_path: Path) -> None:
    """JAAS with `reload=true`: the properties files change without a signal, and the
    next request of a session of a user removed from them is refused."""
    http, stomp_port = free_port(), free_port()
    (tmp_path / "users.properties").write_text("ops=ops-secret\nwatcher=watch-secret\n")
    (tmp_path / "groups.properties").write_text("admins=ops\nusers=watcher\n")
    (tmp_path / "login.config").write_text("""activemq {
    org.apache.activemq.jaas.PropertiesLoginModule required
        org.apache.activemq.jaas.properties.user="users.properties"
        org.apache.activemq.jaas.properties.group="groups.properties"
        reload=true;
};
""")
    config = tmp_path / "activemq.xml"
    config.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core"
        brokerName="login-jaas">
  <plugins>
    <jaasAuthenticationPlugin configuration="activemq" loginConfig="{tmp_path}/login.config"/>
    <console host="127.0.0.1" port="{http}"/>
  </plugins>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp_port}"/>
  </transportConnectors>
</broker>""")
    broker = RelaymqProcess(config, tmp_path / "broker.log", ports=[http, stomp_port]).start()
    url = f"http://127.0.0.1:{http}"
    try:
        with httpx.Client(base_url=url, follow_redirects=False, timeout=30) as watcher:
            assert watcher.post("/login", data={"username": VIEWER[0],
                                                "password": VIEWER[1]}).status_code == 303
            assert watcher.get("/api/v1/queues").status_code == 200
            (tmp_path / "users.properties").write_text("ops=ops-secret\n")
            (tmp_path / "groups.properties").write_text("admins=ops\n")
            assert watcher.get("/api/v1/queues").status_code == 401
        assert httpx.get(f"{url}/api/v1/queues", auth=ADMIN, timeout=30).status_code == 200
    finally:
        broker.stop()


def test_the_console_users_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    """`usersFile` (a Jetty realm file), edited while the broker runs: new logins and
    the sessions of its users follow the file at their next request, no restart."""
    realm = tmp_path / "jetty-realm.properties"
    realm.write_text("ops: ops-secret, admins\nwatcher: watch-secret, users\n"
                     "keeper: keep-secret, admins\n")
    broker = ConsoleBroker(tmp_path, f'usersFile="{realm}"')
    try:
        watcher, _ = logged_in(broker, VIEWER)
        ops, ops_csrf = logged_in(broker, ADMIN)
        keeper, _ = logged_in(broker, ("keeper", "keep-secret"))
        assert httpx.get(f"{broker.url}/api/v1/queues", auth=("newbie", "new-secret"),
                         timeout=30).status_code == 401
        # watcher removed, ops now a viewer, newbie added, keeper's password changed
        realm.write_text("ops: ops-secret, users\nnewbie: new-secret, users\n"
                         "keeper: kept-secret-2, admins\n")
        assert watcher.get("/api/v1/queues").status_code == 401
        assert watcher.get("/queues").headers.get("location") == "/login"
        assert httpx.get(f"{broker.url}/api/v1/queues", auth=VIEWER, timeout=30).status_code \
            == 401
        assert ops.get("/api/v1/queues").status_code == 200
        demoted = ops.post("/api/v1/queues", json={"name": "realm.after"},
                           headers={"X-CSRF-Token": ops_csrf})
        assert demoted.status_code == 403 and "may only view" in demoted.json()["error"]
        assert httpx.get(f"{broker.url}/api/v1/queues", auth=("newbie", "new-secret"),
                         timeout=30).status_code == 200
        assert keeper.get("/api/v1/queues").status_code == 401  # its password changed
        assert httpx.get(f"{broker.url}/api/v1/queues", auth=("keeper", "kept-secret-2"),
                         timeout=30).status_code == 200
        # a file that no longer parses keeps the users as they were, and says so
        realm.write_text("newbie new-secret\n")
        assert httpx.get(f"{broker.url}/api/v1/queues", auth=("newbie", "new-secret"),
                         timeout=30).status_code == 200
        wait_until(lambda: "keeping the users of" in broker.output(), "the log line",
                   detail=broker.output)
    finally:
        broker.stop()
