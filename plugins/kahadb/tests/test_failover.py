"""Shared-directory master/slave: two `relaymq run` processes on one kahaDB
directory with `<locker><shared-file-locker/></locker>`; kill -9 the master under
load; the slave takes over; producers that fail over lose nothing acknowledged;
the old master, restarted, waits as the slave."""

from __future__ import annotations

import collections
import socket
import threading
import time
from pathlib import Path

import pytest
from relaymq.testing.blocking_stomp import BlockingStomp, drain_queue
from relaymq.testing.waits import wait_until

from .brokers import BrokerProcess

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")

LOCKER = '<locker><shared-file-locker lockAcquireSleepInterval="200"/></locker>'


def listening(broker: BrokerProcess) -> bool:
    try:
        socket.create_connection(("127.0.0.1", broker.port), 0.2).close()
        return True
    except OSError:
        return False


class FailoverProducer:
    """Sends persistent messages with receipts, moving to the other broker when its
    connection breaks (as a `failover:(a,b)` client does); records what was receipted."""

    def __init__(self, name: str, brokers: list[BrokerProcess], queue: str) -> None:
        self.name = name
        self.brokers = brokers
        self.queue = queue
        self.acked: list[str] = []
        self.reconnected = 0
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def start(self) -> FailoverProducer:
        self._thread.start()
        return self

    def join(self) -> None:
        self.stop.set()
        self._thread.join(60)

    def _connect(self) -> BlockingStomp | None:
        deadline = time.monotonic() + 60
        while not self.stop.is_set() and time.monotonic() < deadline:
            for b in self.brokers:
                try:
                    return BlockingStomp(b.port, timeout=5)
                except OSError:
                    continue
            time.sleep(0.1)
        return None

    def _run(self) -> None:
        i = 0
        client = self._connect()
        while client is not None and not self.stop.is_set():
            body = f"{self.name}-{i:06d}"
            i += 1  # a send without a receipt is not resent: it may or may not be stored
            try:
                cmd, _h, _b = client.send(f"/queue/{self.queue}", body.encode())
            except OSError:
                cmd = "lost"
            if cmd == "RECEIPT":
                with self._lock:
                    self.acked.append(body)
                continue
            client.close()
            client = self._connect()
            self.reconnected += 1
        if client is not None:
            client.close()


@pytest.mark.slow
def test_shared_directory_failover_under_load(tmp_path: Path) -> None:
    master = BrokerProcess(tmp_path, name="master", locker=LOCKER).start()
    slave = BrokerProcess(tmp_path, name="slave", locker=LOCKER).start(wait=False)
    producers: list[FailoverProducer] = []
    try:
        wait_until(lambda: "this broker is a slave" in slave.output(),
                   "the slave to say it waits for the lock", 60,
                   detail=slave.output)
        assert "broker=master" in slave.output()  # it names the holder
        assert slave.proc is not None and slave.proc.poll() is None
        assert not listening(slave)  # a slave opens no connectors
        producers = [FailoverProducer(f"p{n}", [master, slave], "HA").start() for n in range(3)]
        wait_until(lambda: sum(p.count() for p in producers) >= 300,
                   "messages stored on the master", 60,
                   detail=master.output)
        master.kill()
        wait_until(lambda: listening(slave), "the slave to take over", 30, detail=slave.output)
        assert "this broker is now the master" in slave.output()
        before = sum(p.count() for p in producers)
        wait_until(lambda: sum(p.count() for p in producers) >= before + 100,
                   "producers to go on storing on the new master", 60,
                   detail=slave.output)
        for p in producers:
            p.join()
        assert all(p.reconnected >= 1 for p in producers)
        acked = [b for p in producers for b in p.acked]
        got = drain_queue(slave.port, "HA")
        counts = collections.Counter(got)
        duplicates = {b: n for b, n in counts.items() if n > 1}
        assert not duplicates, f"delivered more than once: {list(duplicates.items())[:10]}"
        missing = sorted(set(acked) - set(counts))
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:10]}"
        # the old master, restarted on the same directory, is now the slave
        master.start(wait=False)
        wait_until(lambda: "this broker is a slave" in master.output(),
                   "the restarted master to wait as a slave", 60,
                   detail=master.output)
        assert "broker=slave" in master.output().split("this broker is a slave")[0].rsplit("\n", 1)[-1]
        assert not listening(master)
    finally:
        for p in producers:
            p.stop.set()
        master.kill()
        slave.stop()
