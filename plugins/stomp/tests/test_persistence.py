"""With a persistent store (kahaDB): receipts mean stored, and message ids and
durable subscriptions survive a restart."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from relaymq.testing import broker_config, plugin_element

from .conftest import connect

pytestmark = pytest.mark.skipif(importlib.util.find_spec("relaymq_kahadb") is None,
                                reason="relaymq-kahadb is not installed")


def _config(directory: Path):
    cfg = broker_config("stomp://127.0.0.1:0", persistent=True)
    cfg.persistence_adapter = plugin_element("kahaDB", directory=str(directory))
    return cfg


def test_persistent_messages_and_ids_survive_restart(start_broker, tmp_path: Path) -> None:
    bt = start_broker(config=_config(tmp_path))
    conn, col = connect(bt)
    conn.send("/queue/durable.q", "kept", headers={"persistent": "true", "color": "blue"},
              receipt="stored")
    assert col.wait_receipt("stored")  # the receipt comes after the store write
    conn.send("/queue/durable.q", "gone", receipt="transient")  # non-persistent
    assert col.wait_receipt("transient")
    conn.subscribe("/queue/durable.q", id="1", ack="client-individual")
    first = col.wait_messages(2)
    conn.disconnect()
    bt.stop()

    bt2 = start_broker(config=_config(tmp_path))
    conn2, col2 = connect(bt2)
    conn2.subscribe("/queue/durable.q", id="1", ack="client-individual")
    m = col2.wait_messages(1)[0]
    assert m.body == "kept" and m.headers["color"] == "blue"
    assert m.headers["message-id"] == first[0].headers["message-id"]
    assert m.headers["persistent"] == "true"
    conn2.ack(m.headers["ack"], receipt="acked")  # the receipt comes after the removal is stored
    assert col2.wait_receipt("acked")
    conn2.disconnect()
    bt2.stop()

    bt3 = start_broker(config=_config(tmp_path))
    assert bt3.queue_size("durable.q") == 0


def test_durable_subscription_survives_restart(start_broker, tmp_path: Path) -> None:
    bt = start_broker(config=_config(tmp_path))
    conn, col = connect(bt, headers={"client-id": "restart-app"})
    conn.subscribe("/topic/events", id="1", headers={"activemq.subscriptionName": "keep"},
                   receipt="sub")
    assert col.wait_receipt("sub")
    conn.disconnect()
    prod, pcol = connect(bt)
    prod.send("/topic/events", "while away", headers={"persistent": "true"}, receipt="r")
    assert pcol.wait_receipt("r")
    prod.disconnect()
    bt.stop()

    bt2 = start_broker(config=_config(tmp_path))
    conn2, col2 = connect(bt2, headers={"client-id": "restart-app"})
    conn2.subscribe("/topic/events", id="1", headers={"activemq.subscriptionName": "keep"})
    assert [m.body for m in col2.wait_messages(1)] == ["while away"]
    conn2.disconnect()


def test_order_kept_when_stored_sends_suspend(start_broker, tmp_path: Path) -> None:
    """Persistent sends wait for the store while later frames of the same read queue
    behind them: a producer's mix of persistent and non-persistent messages arrives
    in the order it was sent."""
    bt = start_broker(config=_config(tmp_path))
    cons, col = connect(bt)
    cons.subscribe("/queue/mixed", id="1")
    prod, pcol = connect(bt)
    n = 300
    for i in range(n):
        prod.send("/queue/mixed", str(i), headers={"persistent": "true"} if i % 3 else {})
    prod.send("/queue/mixed", "end", receipt="end")
    assert pcol.wait_receipt("end", 20)
    msgs = col.wait_messages(n + 1, timeout=20)
    assert [m.body for m in msgs] == [str(i) for i in range(n)] + ["end"]
    cons.disconnect()
    prod.disconnect()


def test_run_of_persistent_sends_with_a_bad_one(start_broker, tmp_path: Path) -> None:
    """Persistent SENDs in one read are stored together; a refused one in the middle
    gets its own ERROR and the rest are stored and receipted, in order."""
    from .conftest import RawClient

    bt = start_broker(config=_config(tmp_path))
    c = RawClient(bt)
    try:
        c.connect()
        frames = [f"SEND\ndestination:/queue/run\npersistent:true\nreceipt:r{i}\n\n{i}\x00"
                  for i in range(10)]
        frames[4] = "SEND\npersistent:true\nreceipt:r4\n\nno destination\x00"
        frames[6] = "SEND\ndestination:/queue/run\nreceipt:r6\n\n6\x00"  # non-persistent
        c.send("".join(frames))
        got = [c.read() for _ in range(10)]
        assert [(cmd, h.get("receipt-id")) for cmd, h, _ in got] == \
            [("ERROR", "r4")] + [("RECEIPT", f"r{i}") for i in range(10) if i != 4]
        c.send("SUBSCRIBE\ndestination:/queue/run\nid:1\n\n\x00")
        bodies = [c.read()[2] for _ in range(9)]
        assert bodies == [str(i).encode() for i in range(10) if i != 4]
    finally:
        c.close()
