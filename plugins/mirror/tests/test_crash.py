"""kill -9 under load, with `relaymq run` processes (kahaDB) and proton clients.

What the target holds is read up to a marker, never "until quiet": the brokers run
the console, the test waits until the management listings say the mirror has
nothing left to send or settle (or, once the source is dead, that its connection
is gone from the target), and then sends a marker behind the data. Every message
on the target before the marker is counted, so one delivered twice fails."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from mirrortools import BrokerProcess
from proton import Message, Timeout
from proton.utils import BlockingConnection
from relaymq.testing.barriers import MARKER_PROPERTY, new_marker
from relaymq.testing.waits import wait_until

#: kill -9 under load: compiled build only (docs/testing.md)
pytestmark = pytest.mark.slow

pytest.importorskip("relaymq_console", reason="relaymq-console is not installed (the crash "
                    "tests read the brokers' management listings through it)")

N = 1500


def mirror_xml(port: int, name: str, **attrs: str) -> str:
    extra = " ".join(f'{k}="{v}"' for k, v in attrs.items())
    return f"""<broker-connections>
    <amqp-connection uri="tcp://127.0.0.1:{port}" name="{name}" retry-interval="200">
      <mirror {extra}/>
    </amqp-connection>
  </broker-connections>"""


class Producer(threading.Thread):
    """Sends N persistent messages one by one (each waits for its settlement);
    `acked` holds the ids the broker accepted. An exception ends it; `error` keeps
    it and `error_before_kill` says whether it came before `killed` was set (a
    failure: the broker it talks to was still alive)."""

    def __init__(self, url: str, address: str, n: int,
                 killed: threading.Event | None = None) -> None:
        super().__init__(daemon=True)
        self.url, self.address, self.n = url, address, n
        self.killed = killed or threading.Event()
        self.acked: list[str] = []
        self.error: BaseException | None = None
        self.error_before_kill = False

    def run(self) -> None:
        try:
            conn = BlockingConnection(self.url, timeout=30)
            sender = conn.create_sender(self.address)
            for i in range(self.n):
                m = Message(body=f"m{i}", durable=True)
                m.id = f"ID:load-{i}"
                sender.send(m)  # raises unless the broker accepted it
                self.acked.append(m.id)
            conn.close()
        except BaseException as exc:  # noqa: BLE001 - the test decides whether it may fail
            self.error_before_kill = not self.killed.is_set()
            self.error = exc


def drain_to_marker(marker_url: str, url: str, address: str, timeout: float = 120.0
                    ) -> list[str]:
    """Send a marker to `address` on `marker_url`, then receive (and accept) the ids of
    everything on `address` at `url` before it; AssertionError when the marker does
    not arrive within `timeout`. The marker must travel behind the data: through the
    mirror (ordered) from its source, or straight to the target once nothing else
    can reach it."""
    marker = new_marker()
    conn = BlockingConnection(marker_url, timeout=30)
    try:
        sender = conn.create_sender(address)
        sender.send(Message(id=marker, body=marker, durable=True,
                            properties={MARKER_PROPERTY: marker}))
    finally:
        conn.close()
    got: list[str] = []
    conn = BlockingConnection(url, timeout=30)
    try:
        rcv = conn.create_receiver(address, credit=200)
        deadline = time.monotonic() + timeout
        while True:
            try:
                m = rcv.receive(timeout=max(deadline - time.monotonic(), 0.001))
            except Timeout:
                raise AssertionError(f"the marker sent to {address} did not arrive within "
                                     f"{timeout:g} s; {len(got)} messages before it") from None
            rcv.accept()
            if m.body == marker:
                return got
            got.append(str(m.id))
    finally:
        conn.close()


def mirror_done(source: BrokerProcess) -> None:
    """Wait until the source's mirror is connected with nothing left to send or settle."""
    wait_until(source.mirror_idle, f"the mirror of {source.name} to have nothing pending",
               timeout=120, interval=0.2, detail=lambda: repr(source.mirror_statuses()))


def test_kill_target_under_load_then_restart(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path, "b", console=True).start()
    a = BrokerProcess(tmp_path, "a", mirror_xml(b.port, "B"), console=True).start()
    try:
        producer = Producer(a.url, "queue://load", N)
        producer.start()
        wait_until(lambda: len(producer.acked) >= N // 4, "load under way", timeout=60)
        b.kill9()
        wait_until(lambda: len(producer.acked) >= N // 2, "A keeps serving without B", timeout=60)
        b.start()
        producer.join(120)
        assert not producer.is_alive(), "the producer did not finish"
        assert producer.error is None and len(producer.acked) == N
        mirror_done(a)  # B accepted every event A stored for it
        assert b.queue_depth("load") == N
        got = drain_to_marker(a.url, b.url, "queue://load")  # the marker follows the data
        assert len(got) == N, f"{N - len(set(got))} lost, {len(got) - len(set(got))} doubled"
        assert sorted(got) == sorted(producer.acked)
        wait_until(lambda: b.queue_depth("load") == 0, "B's queue to be empty after the drain")
    finally:
        a.stop()
        b.stop()


def test_kill_source_under_load_sync(tmp_path: Path) -> None:
    """sync=true: what A acknowledged to its producer is on B; what A's consumer
    acknowledged is gone from B, but for acknowledgements in flight (counted)."""
    b = BrokerProcess(tmp_path, "b", console=True).start()
    a = BrokerProcess(tmp_path, "a", mirror_xml(b.port, "B", sync="true")).start()
    consumed: list[str] = []
    consumer_errors: list[BaseException] = []
    stop = threading.Event()
    killed = threading.Event()

    def consume() -> None:
        try:
            conn = BlockingConnection(a.url, timeout=30)
            rcv = conn.create_receiver("queue://work", credit=10)
            while not stop.is_set() and len(consumed) < 300:
                try:
                    m = rcv.receive(timeout=0.5)
                except Timeout:
                    continue
                rcv.accept()
                consumed.append(m.id)
        except BaseException as exc:  # noqa: BLE001 - after the kill it is expected
            if not killed.is_set():
                consumer_errors.append(exc)

    try:
        producer = Producer(a.url, "queue://work", N, killed)
        producer.start()
        consumer = threading.Thread(target=consume, daemon=True)
        wait_until(lambda: len(producer.acked) >= 100, "load under way", timeout=60)
        consumer.start()
        wait_until(lambda: len(producer.acked) >= N // 2 and len(consumed) >= 200,
                   "sends and acks under way", timeout=90)
        node = (a.dir / "node-id").read_text().strip()
        assert any(c["client_id"] == node for c in b.api("connections")["items"])
        killed.set()
        a.kill9()
        stop.set()
        producer.join(30)
        consumer.join(30)
        assert not producer.error_before_kill, f"the producer failed: {producer.error!r}"
        assert not consumer_errors, f"the consumer failed: {consumer_errors!r}"
        # once B has closed A's connection nothing more can arrive from A, so a marker
        # sent to B itself follows everything A's mirror delivered
        wait_until(lambda: all(c["client_id"] != node for c in b.api("connections")["items"]),
                   "B to see the killed source's connection end", timeout=60)
        acked = set(producer.acked)
        on_b = drain_to_marker(b.url, b.url, "queue://work")
        assert len(on_b) == len(set(on_b)), "a message twice on B"
        missing = acked - set(consumed) - set(on_b)
        assert not missing, f"{len(missing)} acknowledged messages missing on B"
        duplicates = set(on_b) & set(consumed)  # consumed on A, its ack still in flight
        print(f"kill -9 of A: {len(acked)} sends acknowledged, {len(consumed)} consumed on A, "
              f"{len(on_b)} on B, {len(duplicates)} duplicates (acks in flight)")
        assert len(duplicates) <= 50
        assert len(on_b) >= len(acked) - len(consumed) > 0
        assert set(on_b) <= set(f"ID:load-{i}" for i in range(N))
    finally:
        stop.set()
        a.stop()
        b.stop()
