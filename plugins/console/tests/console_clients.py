"""What the console's tests share: a STOMP producer with receipts, a STOMP
connection whose messages are collected, a queue's REST view, chromium's flags."""

from __future__ import annotations

import pytest
from relaymq.testing import wait_until

from .conftest import APP

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

#: chromium's flags for the browser tests
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def send(console, dest: str, bodies: list[str], **headers: str) -> None:
    receipts: list[str] = []

    class L(stomp.ConnectionListener):
        def on_receipt(self, frame) -> None:
            receipts.append(frame.headers["receipt-id"])

    conn = stomp.Connection12([("127.0.0.1", console.stomp_port)])
    conn.set_listener("", L())
    conn.connect(*APP, wait=True)
    for i, body in enumerate(bodies):
        conn.send(dest, body, headers={"persistent": "true", "receipt": f"r{i}", **headers})
    wait_until(lambda: len(receipts) == len(bodies), "receipts", 10)
    conn.disconnect()


def collecting(console) -> tuple[stomp.Connection12, list]:
    """A STOMP connection (as the app user) and the list its messages land in."""
    received: list = []

    class L(stomp.ConnectionListener):
        def on_message(self, frame) -> None:
            received.append(frame)

    conn = stomp.Connection12([("127.0.0.1", console.stomp_port)])
    conn.set_listener("", L())
    conn.connect(*APP, wait=True)
    return conn, received


def queue(console, name: str) -> dict:
    r = console.client().get(f"/api/v1/queues/{name}")
    assert r.status_code == 200, r.text
    return r.json()
