"""Crash a real broker process with kill -9 under load; nothing acknowledged is lost.

Producers send persistent messages over STOMP and AMQP and count a message as
accepted only when its RECEIPT arrives (RelayMQ receipts a persistent SEND after
it is durable) or its transfer is settled `accepted` (likewise after the store
has it). A consumer acknowledges with receipts. At a random moment the broker
is killed with SIGKILL, restarted on the same kahaDB directory, and drained.
Every accepted message must be delivered, before the crash (and acknowledged by
the consumer, whether or not the ACK's receipt arrived in time) or after it; a
message whose ACK was receipted before the crash must not come back.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")

from relaymq_stomp.testing import BlockingStomp  # noqa: E402 (after the skips)

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp: Path, port: int, amqp_port: int) -> Path:
    cfg = tmp / "activemq.xml"
    cfg.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core" brokerName="crashy">
  <persistenceAdapter><kahaDB directory="{tmp / 'kahadb'}" cleanupInterval="300"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{amqp_port}"/>
  </transportConnectors>
</broker></beans>""")
    return cfg


def start_broker(cfg: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError as exc:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "broker died") from exc
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("broker did not start listening")


def produce(port: int, tag: str, accepted: set[str], stop: threading.Event) -> None:
    try:
        c = BlockingStomp(port, timeout=5)
        n = 0
        while not stop.is_set():
            body = f"{tag}-{n}"
            c.frame("SEND", {"destination": "/queue/CRASH", "persistent": "true",
                             "receipt": body}, body.encode())
            cmd, headers, _ = c.read()
            if cmd == "RECEIPT" and headers.get("receipt-id") == body:
                accepted.add(body)
            n += 1
    except OSError:
        return


def produce_amqp(port: int, tag: str, accepted: set[str], stop: threading.Event) -> None:
    """Durable transfers, one at a time: accepted once settled with `accepted`."""
    from proton import Delivery, Message
    from proton.utils import BlockingConnection

    try:
        conn = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=5)
        sender = conn.create_sender("queue://CRASH")
        n = 0
        while not stop.is_set():
            body = f"{tag}-{n}"
            d = sender.send(Message(body=body, durable=True))
            if d.remote_state == Delivery.ACCEPTED:
                accepted.add(body)
            n += 1
    except Exception:  # noqa: BLE001 - the broker was killed under us
        return


def consume(port: int, acked: set[str], ack_sent: set[str], stop: threading.Event) -> None:
    try:
        c = BlockingStomp(port, timeout=5)
        c.frame("SUBSCRIBE", {"destination": "/queue/CRASH", "id": "1", "ack": "client-individual",
                              "activemq.prefetchSize": "20"})
        pending: dict[str, str] = {}
        while not stop.is_set():
            cmd, headers, body = c.read()
            if cmd == "MESSAGE":
                rid = f"ack-{headers['ack']}"
                pending[rid] = body.decode()
                ack_sent.add(body.decode())
                c.frame("ACK", {"id": headers["ack"], "receipt": rid})
            elif cmd == "RECEIPT":
                acked.add(pending.pop(headers["receipt-id"]))
    except (OSError, KeyError):
        return


def drain(port: int) -> list[str]:
    c = BlockingStomp(port, timeout=5)
    c.frame("SUBSCRIBE", {"destination": "/queue/CRASH", "id": "1", "ack": "auto"})
    c.sock.settimeout(1.5)
    out = []
    try:
        while True:
            cmd, _, body = c.read()
            if cmd == "MESSAGE":
                out.append(body.decode())
    except TimeoutError:
        pass
    c.close()
    return out


def crash_cycle(tmp: Path, seed: int) -> tuple[int, int]:
    rnd = random.Random(seed)
    port, amqp_port = free_port(), free_port()
    cfg = write_config(tmp, port, amqp_port)
    accepted: set[str] = set()
    acked: set[str] = set()
    ack_sent: set[str] = set()  # the consumer acknowledged; the receipt may not have come
    stop = threading.Event()
    broker = start_broker(cfg, port)
    threads = [threading.Thread(target=produce, args=(port, f"p{i}-{seed}", accepted, stop))
               for i in range(2)]
    threads += [threading.Thread(target=produce_amqp, args=(amqp_port, f"a{i}-{seed}", accepted, stop))
                for i in range(2)]
    threads.append(threading.Thread(target=consume, args=(port, acked, ack_sent, stop)))
    for t in threads:
        t.start()
    time.sleep(rnd.uniform(0.5, 2.0))
    os.kill(broker.pid, signal.SIGKILL)
    broker.wait()
    stop.set()
    for t in threads:
        t.join(10)
    broker = start_broker(cfg, port)
    try:
        after = drain(port)
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(15)
    assert any(a.startswith("a") for a in accepted) and any(a.startswith("p") for a in accepted)
    lost = accepted - ack_sent - set(after)
    assert not lost, f"seed {seed}: {len(lost)} accepted messages lost, e.g. {sorted(lost)[:5]}"
    again = acked & set(after)
    assert not again, f"seed {seed}: acknowledged messages came back: {sorted(again)[:5]}"
    return len(accepted), len(after)


def test_kill_9_loses_no_accepted_message(tmp_path):
    accepted, redelivered = crash_cycle(tmp_path, seed=1)
    assert accepted > 0


@pytest.mark.slow
def test_kill_9_repeatedly(tmp_path):
    total = 0
    for seed in range(2, 8):
        accepted, _ = crash_cycle(tmp_path, seed)  # the same directory, crash after crash
        total += accepted
    assert total > 0
