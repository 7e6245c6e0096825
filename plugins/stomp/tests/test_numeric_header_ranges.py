"""Numeric SEND headers outside the range of the field that keeps them.

`priority`, `expires`, `timestamp`, `JMSXGroupSeq` and `AMQ_SCHEDULED_*` become
fixed-width fields of the message and its kahaDB record. One past its range
used to be accepted and then fail the store write ("int too large to
convert"), which could be one write with other producers' sends and acks. A
SEND now refuses it with an ERROR naming the header and its range (with the
receipt-id the SEND asked for), as ActiveMQ's NumberFormatException does; the
connection stays and so does everything else's work.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import pytest
import stomp
from relaymq.testing import broker_config, plugin_element
from relaymq.testing.blocking_stomp import BlockingStomp, drain_queue

from .conftest import BrokerThread

pytestmark = pytest.mark.skipif(importlib.util.find_spec("relaymq_kahadb") is None,
                                reason="relaymq-kahadb is not installed")

LONG = 1 << 63
INT = 1 << 31
#: (header, value, the range the ERROR names)
OUT_OF_RANGE = [
    ("timestamp", str(LONG), f"{-LONG} to {LONG - 1}"),
    ("timestamp", str(-LONG - 1), f"{-LONG} to {LONG - 1}"),
    ("expires", str(LONG), f"{-LONG} to {LONG - 1}"),
    ("expires", "1" * 40, f"{-LONG} to {LONG - 1}"),
    ("priority", str(INT), f"{-INT} to {INT - 1}"),
    ("JMSXGroupSeq", str(INT), f"0 to {INT - 1}"),
    ("JMSXGroupSeq", str(1 << 40), f"0 to {INT - 1}"),
    ("JMSXGroupSeq", "-1", f"0 to {INT - 1}"),
    ("AMQ_SCHEDULED_DELAY", str(LONG), f"{-LONG} to {LONG - 1}"),
    ("AMQ_SCHEDULED_PERIOD", str(LONG), f"{-LONG} to {LONG - 1}"),
    ("AMQ_SCHEDULED_REPEAT", str(INT), f"{-INT} to {INT - 1}"),
]


def kaha(tmp_path: Path, **fields: Any) -> Any:
    cfg = broker_config("stomp://127.0.0.1:0", persistent=True, **fields)
    cfg.persistence_adapter = plugin_element("kahaDB", directory=str(tmp_path / "kaha"))
    return cfg


def test_an_out_of_range_header_is_refused_and_the_connection_goes_on(
        start_broker: Any, tmp_path: Path) -> None:
    bt: BrokerThread = start_broker(config=kaha(tmp_path))
    c = BlockingStomp(bt.port, timeout=10)
    try:
        for i, (name, value, allowed) in enumerate(OUT_OF_RANGE):
            cmd, headers, body = c.send("/queue/R", f"bad-{i}".encode(), **{name: value})
            assert cmd == "ERROR", (name, value, cmd, headers)
            assert headers.get("receipt-id") == "r", headers
            assert name in headers["message"] and allowed in headers["message"], headers
            assert allowed in body.decode(), body
            # the same connection's next SEND is stored
            cmd, headers, _ = c.send("/queue/R", f"good-{i}".encode())
            assert cmd == "RECEIPT", (cmd, headers)
        # a non-numeric value says the range too
        cmd, headers, body = c.send("/queue/R", b"nan", JMSXGroupSeq="x")
        assert cmd == "ERROR" and f"0 to {INT - 1}" in body.decode(), (cmd, headers, body)
    finally:
        c.close()
    assert drain_queue(bt.port, "R", 30) == [f"good-{i}" for i in range(len(OUT_OF_RANGE))]


def test_the_range_limits_themselves_are_stored_and_delivered(
        start_broker: Any, tmp_path: Path) -> None:
    bt: BrokerThread = start_broker(config=kaha(tmp_path))
    c = BlockingStomp(bt.port, timeout=10)
    try:
        cmd, headers, _ = c.send("/queue/L", b"limits", timestamp=str(LONG - 1),
                                 expires=str(LONG - 1), priority=str(INT - 1),
                                 JMSXGroupID="g", JMSXGroupSeq=str(INT - 1))
        assert cmd == "RECEIPT", (cmd, headers)
        c.frame("SUBSCRIBE", {"destination": "/queue/L", "id": "s", "ack": "auto"})
        cmd, headers, body = c.read()
        assert (cmd, body) == ("MESSAGE", b"limits"), (cmd, headers, body)
        assert headers["JMSXGroupSeq"] == str(INT - 1)
        assert headers["timestamp"] == str(LONG - 1)
        assert headers["expires"] == str(LONG - 1)
        assert headers["priority"] == "9"
    finally:
        c.close()


GOOD = 300


def test_a_refused_send_fails_alone_while_another_producer_sends(
        start_broker: Any, tmp_path: Path) -> None:
    """A stomp.py producer sends persistent messages with receipts on its own
    connection while refused SENDs arrive on another: every one of its sends is
    answered with a RECEIPT, stored and consumable."""
    bt: BrokerThread = start_broker(config=kaha(tmp_path))
    receipts: list[str] = []
    errors: list[Any] = []
    done = threading.Event()

    class Listener(stomp.ConnectionListener):
        def on_receipt(self, frame: Any) -> None:
            receipts.append(frame.headers["receipt-id"])
            if len(receipts) == GOOD:
                done.set()

        def on_error(self, frame: Any) -> None:
            errors.append(frame)
            done.set()

    good = stomp.Connection12([(bt.host, bt.port)], heartbeats=(0, 0), reconnect_attempts_max=1)
    good.set_listener("l", Listener())
    good.connect(wait=True)
    bad = BlockingStomp(bt.port, timeout=10)
    refused = 0
    try:
        sender = threading.Thread(target=lambda: [
            good.send("/queue/C", f"good-{i}", persistent="true", receipt=f"g{i}")
            for i in range(GOOD)])
        sender.start()
        while sender.is_alive() or refused < 20:
            name, value, _ = OUT_OF_RANGE[refused % len(OUT_OF_RANGE)]
            cmd, headers, _ = bad.send("/queue/C", b"bad", **{name: value})
            assert cmd == "ERROR", (cmd, headers)
            refused += 1
        sender.join(30)
        assert done.wait(60), f"{len(receipts)} of {GOOD} receipts"
        assert errors == []
        assert sorted(receipts) == sorted(f"g{i}" for i in range(GOOD))
        # the refused connection still sends
        assert bad.send("/queue/C", b"after")[0] == "RECEIPT"
    finally:
        bad.close()
        good.disconnect()
    assert drain_queue(bt.port, "C", 60) == [f"good-{i}" for i in range(GOOD)] + ["after"]
