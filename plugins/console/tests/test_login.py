"""Logins and sessions over real HTTP, each against a broker process of its own (these
tests block 127.0.0.1's logins on purpose, and change users, which would disturb the
shared broker's other tests): the failed-login throttle and its `Retry-After`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from relaymq.testing import wait_until

from .conftest import ADMIN, ConsoleBroker

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
