"""The same broker on uvloop, the loop `relaymq run` uses when it is installed:
eager frame handling, flow control and errors behave the same."""

from __future__ import annotations

import threading

import pytest
from relaymq.config.model import SystemUsageConfig, UsageLimit
from relaymq.testing import wait_until

from .conftest import RawClient, connect, flood

uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed (pip install relaymq[fast])")


@pytest.fixture
def uv_broker(start_broker):
    def make(**fields):
        return start_broker(loop_factory=uvloop.new_event_loop, **fields)
    return make


def test_send_receive_ack_on_uvloop(uv_broker) -> None:
    bt = uv_broker()
    conn, col = connect(bt)
    conn.subscribe("/queue/uv", id="1", ack="client-individual")
    for i in range(500):
        conn.send("/queue/uv", str(i), headers={"persistent": "true"})
    msgs = col.wait_messages(500)
    assert [m.body for m in msgs] == [str(i) for i in range(500)]
    conn.ack(msgs[-1].headers["ack"], receipt="a")
    assert col.wait_receipt("a")
    conn.disconnect()


def test_flow_control_on_uvloop(uv_broker) -> None:
    bt = uv_broker(system_usage=SystemUsageConfig(memory=UsageLimit(limit=300_000)))
    n = 2000
    done = threading.Event()
    t = threading.Thread(target=flood, args=(bt.host, bt.port, n, done), daemon=True)
    t.start()
    wait_until(bt.read_paused, "the producer's connection paused by flow control")
    assert not done.is_set()
    assert 0 < bt.queue_size("flow") < 600
    cons, col = connect(bt)
    cons.subscribe("/queue/flow", id="1")
    msgs = col.wait_messages(n + 1, timeout=30)
    assert done.wait(10)
    assert [m.headers.get("seq") for m in msgs[:n]] == [str(i) for i in range(n)]
    cons.disconnect()


def test_errors_on_uvloop(uv_broker) -> None:
    bt = uv_broker()
    c = RawClient(bt)
    try:
        c.connect()
        c.send("SEND\nreceipt:r\n\nx\x00")
        assert c.read()[0] == "ERROR"
        c.send("SEND\ndestination:/queue/ok\nreceipt:ok\n\nx\x00BOGUS\n\n\x00")
        assert c.read()[0] == "RECEIPT"
        assert c.read()[0] == "ERROR"
        assert c.closed()
    finally:
        c.close()
