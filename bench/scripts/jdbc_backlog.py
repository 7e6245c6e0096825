"""A large backlog on the JDBC store: stored, the broker restarted, browsed, drained.

    .venv/bin/python bench/scripts/jdbc_backlog.py [--messages 1000000] [--db sqlite|postgresql]
        [--producers 16] [--window 16] [--size 1024] [--browse 20000]

What runs (private: free ports, a temporary directory, everything stopped at the end):
`relaymq run` with `<jdbcPersistenceAdapter>` on a SQLite file (or a private
PostgreSQL, `relaymq_jdbc.testing.PostgresCluster`, fsync on) and a STOMP
connector. `--producers` STOMP connections send `--messages` persistent 1 KiB
messages to one queue with no consumer (each keeping `--window` SENDs with
receipts in flight); the broker is stopped (SIGTERM) and started again; a STOMP
browser reads the first `--browse` messages; then one consumer drains the queue
(`ack:client-individual`).

Reported: the send phase (msg/s, broker CPU µs per message), the restart (time
to listen again, broker RSS after it), the browse (msg/s), the drain (msg/s,
broker CPU µs per message) and the broker's peak RSS while draining, sampled
from /proc every 0.2 s, with the store file's size (SQLite). Memory that stays
flat while a million messages go through is what the store's paging promises.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import jdbc_vs_activemq as amq  # noqa: E402  (the STOMP load and process helpers)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class PeakRSS:
    """Samples a process's RSS in a thread until stopped; `peak` in MB."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:
                return

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


async def browse(port: int, queue: str, count: int) -> int:
    reader, writer = await amq.connect(port)
    writer.write(f"SUBSCRIBE\ndestination:/queue/{queue}\nid:b\nbrowser:true\n\n\0".encode())
    got = 0
    while got < count:
        cmd, h, _b = await amq.read_frame(reader)
        if cmd == "MESSAGE":
            if h.get("browser") == "end":
                break
            got += 1
    writer.write(b"DISCONNECT\n\n\0")
    writer.close()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--producers", type=int, default=16)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--browse", type=int, default=20000)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="relaymq-jdbc-backlog-"))
    os.chmod(work, 0o755)  # PostgreSQL runs as its own user when this runs as root
    cluster = None
    broker = None
    try:
        if args.db == "postgresql":
            from relaymq_jdbc.testing import PostgresCluster

            (work / "pg").mkdir()
            cluster = PostgresCluster(work / "pg").start()
            url, db = cluster.url(cluster.create_database("backlog")), "backlog"
        else:
            url, db = f"sqlite:///{work}/store.sqlite", None
        base = work / "broker"
        broker = amq.start_relaymq(base, url, db, f"RelayMQ JDBC ({args.db})")
        config = base / "activemq.xml"
        body = b"x" * args.size
        per = args.messages // args.producers
        total = per * args.producers
        queue = "backlog"

        cpu0, t0 = amq.cpu_seconds(broker.proc.pid), time.monotonic()

        async def send_all() -> None:
            await asyncio.gather(*(amq.produce(broker.port, queue, per, args.window, body)
                                   for _ in range(args.producers)))

        asyncio.run(send_all())
        t1, cpu1 = time.monotonic(), amq.cpu_seconds(broker.proc.pid)
        rss_full = rss_mb(broker.proc.pid)
        print(f"stored {total} in {t1 - t0:.1f} s: {total / (t1 - t0):.0f} msg/s, "
              f"{(cpu1 - cpu0) / total * 1e6:.1f} µs CPU/msg; broker RSS {rss_full:.0f} MB",
              flush=True)

        broker.proc.send_signal(signal.SIGTERM)
        broker.proc.wait(300)
        store_mb = (work / "store.sqlite").stat().st_size / 2**20 if db is None else 0.0
        t2 = time.monotonic()
        proc = amq.subprocess.Popen([amq.RELAYMQ, "run", "--config", str(config)],
                                    stdout=open(base / "out.log", "ab"),  # noqa: SIM115
                                    stderr=amq.subprocess.STDOUT, start_new_session=True,
                                    cwd=base)
        broker = amq.Running(broker.name, proc, broker.port, db)
        amq.wait_port(broker.port, proc, base / "out.log")
        t3 = time.monotonic()
        rss_restart = rss_mb(proc.pid)
        print(f"restarted in {t3 - t2:.1f} s; broker RSS {rss_restart:.0f} MB"
              + (f"; store file {store_mb:.0f} MB" if db is None else ""), flush=True)

        peak = PeakRSS(proc.pid)
        t4 = time.monotonic()
        seen = asyncio.run(browse(broker.port, queue, args.browse))
        t5 = time.monotonic()
        print(f"browsed {seen} in {t5 - t4:.1f} s: {seen / (t5 - t4):.0f} msg/s", flush=True)
        cpu6, t6 = amq.cpu_seconds(proc.pid), time.monotonic()
        asyncio.run(amq.consume(broker.port, queue, total))
        t7, cpu7 = time.monotonic(), amq.cpu_seconds(proc.pid)
        top = peak.stop()
        print(f"drained {total} in {t7 - t6:.1f} s: {total / (t7 - t6):.0f} msg/s, "
              f"{(cpu7 - cpu6) / total * 1e6:.1f} µs CPU/msg; peak broker RSS while browsing "
              f"and draining {top:.0f} MB (after the restart {rss_restart:.0f} MB)", flush=True)
    finally:
        if broker is not None:
            broker.stop()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
