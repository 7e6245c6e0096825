"""A broker that loses its store lock stops serving: kahaDB's lock file is taken
by "another broker" (removed and re-created and locked by this test), and a real
STOMP client sees its connection closed; the broker says so in one log line."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import sys
from pathlib import Path

import pytest

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from feed_support import BrokerLoop  # noqa: E402
from relaymq.spi.persistence import LockState  # noqa: E402
from relaymq.testing import (  # noqa: E402
    broker_config,
    plugin_element,
    wait_until,  # noqa: E402
)
from relaymq_stomp.testing import BlockingStomp  # noqa: E402


def kaha(tmp: Path, **attrs: str):  # type: ignore[no-untyped-def]
    cfg = broker_config("stomp://127.0.0.1:0", persistent=True)
    cfg.persistence_adapter = plugin_element("kahaDB", directory=str(tmp / "kahadb"), **attrs)
    return cfg


def test_a_broker_that_loses_its_store_lock_stops_serving(tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    broker = BrokerLoop(kaha(tmp_path, lockKeepAlivePeriod="100"))
    taken = -1
    try:
        assert broker.call(lambda: broker.broker.store.lock_state) == LockState.HELD
        port = broker.port("stomp")
        client = BlockingStomp(port)
        assert client.send("/queue/lock.q", b"before")[0] == "RECEIPT"
        # another broker takes the directory: the lock file is replaced and locked
        lock = tmp_path / "kahadb" / "lock"
        os.rename(lock, tmp_path / "old-lock")
        taken = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(taken, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(taken, b"pid=4242 host=other\n")

        def closed() -> bool:
            client.sock.settimeout(0.2)
            try:
                client.read()
            except TimeoutError:
                return False
            except (ConnectionError, OSError):
                return True
            return False

        wait_until(closed, timeout=15, what="the broker to close the client's connection")
        assert broker.call(lambda: broker.broker.store.lock_state) == LockState.LOST
        wait_until(lambda: not broker.call(lambda: broker.broker.started), what="the broker to stop")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), 1).close()
        lines = [r.getMessage() for r in caplog.records if "lost its store lock" in r.getMessage()]
        assert len(lines) == 1
        assert "was replaced" in lines[0] and "stops serving" in lines[0]
        assert broker.call(lambda: broker.broker.stop_reason).startswith("lost its store lock")
    finally:
        if taken >= 0:
            os.close(taken)
        broker.stop()


def test_lock_state_waiting_then_held(tmp_path: Path) -> None:
    first = BrokerLoop(kaha(tmp_path))
    second = None
    try:
        from relaymq.broker.broker import Broker

        async def start_second() -> Broker:
            b = Broker(kaha(tmp_path, failIfLocked="false", lockAcquireSleepInterval="100"),
                       strict=True)
            first.loop.create_task(b.start())  # waits for the lock
            return b

        second_broker = first.run(start_second())

        def state() -> str:
            store = second_broker.store
            return store.lock_state if store is not None else "unbuilt"

        wait_until(lambda: first.call(state) == LockState.WAITING, what="the second broker to wait")
        first.run(first.broker.stop())
        wait_until(lambda: first.call(state) == LockState.HELD, what="the second broker to take the lock")
        wait_until(lambda: first.call(lambda: second_broker.started), what="the second broker to start")
        second = second_broker
    finally:
        if second is not None:
            first.run(second.stop())
        first.stop()
