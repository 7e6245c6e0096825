"""Browsers see what the queue holds, in memory or only in the store (issue 16.7).

After a restart with 1,000 recovered persistent messages (kahaDB), 500 sent
afterwards stayed in the store (the queue was still paging the recovered ones
in) and a STOMP browser was shown only the first 1,000, though consumers then
received all 1,500. A browser -- STOMP `browser:true`, AMQP distribution-mode
`copy` -- must see every message, in order.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")

from proton.reactor import Copy  # noqa: E402
from proton.utils import BlockingConnection  # noqa: E402

from .broker_process import BrokerProcess  # noqa: E402

RECOVERED, LATER = 1000, 500


class Listener(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.messages: list[Any] = []
        self.receipts: list[str] = []
        self.errors: list[Any] = []

    def on_message(self, frame: Any) -> None:
        with self.cond:
            self.messages.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.receipts.append(frame.headers["receipt-id"])
            self.cond.notify_all()

    def on_error(self, frame: Any) -> None:
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def wait(self, what: str, pred: Any, timeout: float = 60) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: pred() or self.errors, timeout):
                raise AssertionError(f"timed out waiting for {what}")
        assert self.errors == [], [e.body for e in self.errors]


def _text(message: Any) -> str:
    """A STOMP SEND with content-length (stomp.py adds it) reaches AMQP as a data body; its
    memoryview lives only as long as the message, so convert while holding it."""
    body = message.body
    return body if isinstance(body, str) else bytes(body).decode()


def _stomp(bp: BrokerProcess) -> tuple[Any, Listener]:
    conn = stomp.Connection12([("127.0.0.1", bp.stomp_port)], heartbeats=(0, 0),
                              reconnect_attempts_max=1)
    listener = Listener()
    conn.set_listener("", listener)
    conn.connect(wait=True)
    return conn, listener


def _send(bp: BrokerProcess, first: int, count: int) -> None:
    conn, listener = _stomp(bp)
    for i in range(first, first + count):
        last = i == first + count - 1
        conn.send("/queue/browse.me", str(i), headers={"persistent": "true"},
                  receipt="sent" if last else None)
    listener.wait("the last send's receipt", lambda: "sent" in listener.receipts)
    conn.disconnect()


@pytest.fixture
def restarted(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A kahaDB broker that held 1,000 messages across a restart, then got 500 more."""
    bp = BrokerProcess(tmp_path, "any", persistence=f'<kahaDB directory="{tmp_path}/kahadb"/>')
    bp.start()
    try:
        _send(bp, 0, RECOVERED)
        bp.stop()
        assert bp.proc is not None and bp.proc.returncode == 0, bp.output()[-2000:]
        bp.start()
        _send(bp, RECOVERED, LATER)
        yield bp
    finally:
        bp.stop()


def test_stomp_browser_sees_recovered_and_later_messages_in_order(restarted: BrokerProcess) -> None:
    conn, listener = _stomp(restarted)
    conn.subscribe("/queue/browse.me", id="b", ack="auto", headers={"browser": "true"})
    listener.wait("the end of the browse",
                  lambda: any(m.headers.get("browser") == "end" for m in listener.messages))
    bodies = [m.body for m in listener.messages if m.headers.get("browser") != "end"]
    assert bodies == [str(i) for i in range(RECOVERED + LATER)]
    conn.disconnect()
    # browsing took nothing: a consumer still gets all of them, in order
    conn, listener = _stomp(restarted)
    conn.subscribe("/queue/browse.me", id="c", ack="auto")
    listener.wait("every message", lambda: len(listener.messages) >= RECOVERED + LATER)
    assert [m.body for m in listener.messages] == [str(i) for i in range(RECOVERED + LATER)]
    conn.disconnect()


def test_amqp_copy_receiver_sees_recovered_and_later_messages_in_order(
        restarted: BrokerProcess) -> None:
    conn = BlockingConnection(f"127.0.0.1:{restarted.amqp_port}", timeout=30)
    try:
        browser = conn.create_receiver("queue://browse.me", credit=200, options=Copy())
        bodies = [_text(browser.receive(timeout=30)) for _ in range(RECOVERED + LATER)]
        assert bodies == [str(i) for i in range(RECOVERED + LATER)]
        browser.close()
        consumer = conn.create_receiver("queue://browse.me", credit=200)
        got = []
        for _ in range(RECOVERED + LATER):
            got.append(_text(consumer.receive(timeout=30)))
            consumer.accept()
        assert got == [str(i) for i in range(RECOVERED + LATER)]
    finally:
        conn.close()


class Acking(stomp.ConnectionListener):
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def on_message(self, frame: Any) -> None:
        self.conn.ack(frame.headers["ack"])


@pytest.mark.parametrize("store", ["kahadb", "jdbc-sqlite"])
def test_a_recovered_queue_of_large_messages_is_delivered_once(tmp_path: Path, store: str) -> None:
    """A queue of 200 KB messages recovered after a restart: its memory window holds
    few, so it pages in often while a consumer acknowledges. Every message arrives
    once (two page-ins read the same stretch of the store and delivered part of it
    twice, on kahaDB and JDBC alike)."""
    count, size = 200, 200_000
    if store == "kahadb":
        adapter = f'<kahaDB directory="{tmp_path}/kahadb"/>'
    else:
        pytest.importorskip("relaymq_jdbc", reason="relaymq-jdbc is not installed")
        adapter = f'<jdbcPersistenceAdapter url="sqlite:///{tmp_path}/store.sqlite"/>'
    bp = BrokerProcess(tmp_path, "any", persistence=adapter)
    bp.start()
    try:
        conn, listener = _stomp(bp)
        for i in range(count):
            conn.send("/queue/large.recovered", f"{i:06d}".ljust(size, "x"),
                      headers={"persistent": "true", "n": str(i)},
                      receipt="sent" if i == count - 1 else None)
        listener.wait("the last send's receipt", lambda: "sent" in listener.receipts)
        conn.disconnect()
        bp.stop()
        assert bp.proc is not None and bp.proc.returncode == 0, bp.output()[-2000:]
        bp.start()
        conn, listener = _stomp(bp)
        acking = Acking(conn)
        conn.set_listener("ack", acking)  # acknowledges each as it comes, as a fast consumer
        conn.subscribe("/queue/large.recovered", id="c", ack="client-individual",
                       headers={"activemq.prefetchSize": "500"})
        listener.wait("every message", lambda: len(listener.messages) >= count)
        conn.send("/queue/large.recovered", "marker", headers={"n": "marker"}, receipt="m")
        listener.wait("the marker", lambda: any(m.headers["n"] == "marker"
                                                for m in listener.messages))
        got = [m.headers["n"] for m in listener.messages]
        assert got == [str(i) for i in range(count)] + ["marker"], \
            f"{len(got) - 1} deliveries of {count} messages"
        conn.disconnect()
    finally:
        bp.stop()
