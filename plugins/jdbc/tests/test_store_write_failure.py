"""One store write that the database refuses fails exactly the sends in it: the
STOMP producer gets an ERROR frame for that receipt and the AMQP producer a
`rejected` disposition with `amqp:internal-error` and the database's words; the
broker logs it once; the next sends on the same connections are stored; nothing
stored before is lost.

The database refuses for real: a SQLite trigger aborts the insert of a message
whose bytes carry a marker, with SQLite's own "database or disk is full" text."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from relaymq.testing import broker_config, plugin_element
from relaymq.testing.threads import BrokerThread

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")

from proton.utils import BlockingConnection  # noqa: E402
from relaymq.testing.blocking_stomp import BlockingStomp, drain_queue  # noqa: E402

MARKER = b"refused-by-the-disk"


def test_a_refused_store_write_fails_only_its_sends(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "store.sqlite"
    cfg = broker_config("stomp://127.0.0.1:0", "amqp://127.0.0.1:0", persistent=True,
                        data_directory=str(tmp_path))
    cfg.persistence_adapter = plugin_element("jdbcPersistenceAdapter", url=f"sqlite:///{db}",
                                             useLock="false")
    bt = BrokerThread(cfg).start()
    try:
        with sqlite3.connect(db) as sql:
            sql.execute("CREATE TRIGGER refuse BEFORE INSERT ON ACTIVEMQ_MSGS "
                        "WHEN instr(NEW.MSG, CAST('" + MARKER.decode() + "' AS BLOB)) > 0 "
                        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        stomp = BlockingStomp(bt.address("stomp")[1])
        assert stomp.send("/queue/D", b"before")[0] == "RECEIPT"

        caplog.clear()
        with caplog.at_level(logging.INFO):
            cmd, headers, _ = stomp.send("/queue/D", MARKER)
            assert cmd == "ERROR", (cmd, headers)
            assert headers["receipt-id"] == "r"
            assert "database or disk is full" in headers["message"]
            # the connection stays usable: the next SEND is stored
            assert stomp.send("/queue/D", b"after")[0] == "RECEIPT"
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1, [r.getMessage() for r in errors]

        amqp = BlockingConnection(f"amqp://{bt.connector('amqp')}", timeout=10)
        sender = amqp.create_sender("queue://D")
        refused = sender.send(proton.Message(body=MARKER.decode(), durable=True),
                              error_states=[])
        assert refused.remote_state == proton.Delivery.REJECTED
        condition = refused.remote.condition
        assert condition is not None and condition.name == "amqp:internal-error"
        assert "database or disk is full" in condition.description
        sender.send(proton.Message(body="after (amqp)", durable=True))
        amqp.close()
        stomp.close()
        assert drain_queue(bt.address("stomp")[1], "D", 30) == ["before", "after", "after (amqp)"]
    finally:
        bt.stop()
