"""kill -9 under load, with `relaymq run` processes (kahaDB) and proton clients."""

from __future__ import annotations

import threading
from pathlib import Path

from mirrortools import BrokerProcess, receive
from proton import Message
from proton.utils import BlockingConnection
from relaymq.testing.waits import wait_until

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
    `acked` holds the ids the broker accepted."""

    def __init__(self, url: str, address: str, n: int) -> None:
        super().__init__(daemon=True)
        self.url, self.address, self.n = url, address, n
        self.acked: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = BlockingConnection(self.url, timeout=30)
            sender = conn.create_sender(self.address)
            for i in range(self.n):
                m = Message(body=f"m{i}", durable=True)
                m.id = f"ID:load-{i}"
                sender.send(m)
                self.acked.append(m.id)
            conn.close()
        except BaseException as exc:  # noqa: BLE001 - the broker was killed
            self.error = exc


def drain(url: str, address: str, expected: int) -> list[str]:
    got = [m.id for m in receive(url, address, expected, timeout=90)]
    got += [m.id for m in receive(url, address, 10**6, timeout=2)]  # anything beyond: doubled
    return got


def test_kill_target_under_load_then_restart(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path, "b").start()
    a = BrokerProcess(tmp_path, "a", mirror_xml(b.port, "B")).start()
    try:
        producer = Producer(a.url, "queue://load", N)
        producer.start()
        wait_until(lambda: len(producer.acked) >= N // 4, "load under way", timeout=60)
        b.kill9()
        wait_until(lambda: len(producer.acked) >= N // 2, "A keeps serving without B", timeout=60)
        b.start()
        producer.join(120)
        assert producer.error is None and len(producer.acked) == N
        got = drain(b.url, "queue://load", N)
        assert len(got) == N, f"{N - len(set(got))} lost, {len(got) - len(set(got))} doubled"
        assert sorted(got) == sorted(producer.acked)
    finally:
        a.stop()
        b.stop()


def test_kill_source_under_load_sync(tmp_path: Path) -> None:
    """sync=true: what A acknowledged to its producer is on B; what A's consumer
    acknowledged is gone from B, but for acknowledgements in flight (counted)."""
    b = BrokerProcess(tmp_path, "b").start()
    a = BrokerProcess(tmp_path, "a", mirror_xml(b.port, "B", sync="true")).start()
    consumed: list[str] = []
    stop = threading.Event()

    def consume() -> None:
        try:
            conn = BlockingConnection(a.url, timeout=30)
            rcv = conn.create_receiver("queue://work", credit=10)
            while not stop.is_set() and len(consumed) < 300:
                try:
                    m = rcv.receive(timeout=0.5)
                except Exception:  # noqa: BLE001 - timeout, or the broker is gone
                    if stop.is_set():
                        break
                    continue
                rcv.accept()
                consumed.append(m.id)
        except BaseException:  # noqa: BLE001 - killed
            pass

    try:
        producer = Producer(a.url, "queue://work", N)
        producer.start()
        consumer = threading.Thread(target=consume, daemon=True)
        wait_until(lambda: len(producer.acked) >= 100, "load under way", timeout=60)
        consumer.start()
        wait_until(lambda: len(producer.acked) >= N // 2 and len(consumed) >= 200,
                   "sends and acks under way", timeout=90)
        a.kill9()
        stop.set()
        producer.join(30)
        consumer.join(30)
        acked = set(producer.acked)
        on_b = drain(b.url, "queue://work", len(acked) - len(consumed))
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
