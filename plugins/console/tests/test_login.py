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
