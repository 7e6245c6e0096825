from __future__ import annotations

from typing import Any

from mirrortools import mirror_element, receive, send
from relaymq.testing.waits import wait_until


def test_a_to_b_queue_messages_and_acks(brokers: Any) -> None:
    b = brokers()
    a = brokers(mirrors=[mirror_element(f"tcp://{b.address}", "B")])
    wait_until(lambda: a.mirror_status("B").get("state") == "connected", "mirror connected")
    send(a.url, "queue://orders", [f"m{i}" for i in range(20)])
    wait_until(lambda: b.depth("queue://orders") == 20, "20 on B")
    got = receive(a.url, "queue://orders", 5)
    assert len(got) == 5
    wait_until(lambda: b.depth("queue://orders") == 15, "acks mirrored")
    rest = receive(b.url, "queue://orders", 15)
    assert sorted(m.body for m in rest) == sorted(f"m{i}" for i in range(5, 20))


def test_sync_copies_what_existed_before(brokers: Any) -> None:
    b = brokers()
    a = brokers(mirrors=[mirror_element(f"tcp://{b.address}", "B", **{"auto-start": "false"})])
    send(a.url, "queue://old", [f"o{i}" for i in range(30)])
    a.run(a.broker.management.start_broker_connection("B"))
    wait_until(lambda: a.mirror_status("B").get("state") == "connected", "mirror connected")
    send(a.url, "queue://old", ["new"])
    wait_until(lambda: b.depth("queue://old") == 1, "only the new message is mirrored")
    result = a.run(a.broker.management.broker_connection_operation("B", "sync"))
    assert result[0]["messages"] == 31 and result[0]["destinations"] >= 1
    wait_until(lambda: b.depth("queue://old") == 31, "the old ones after sync (no duplicate)")
    a.run(a.broker.management.broker_connection_operation("B", "sync"))
    assert b.depth("queue://old") == 31
