"""A lean AMQP throughput/CPU measurement for RelayMQ (and any AMQP 1.0 broker).

Why a script of its own: it measures one thing -- broker CPU per message and
end-to-end rate for N producers and M consumers on one queue -- and it runs
the broker in its own process so its CPU can be read from /proc. The load
comes from relaymq-bench's lean AMQP client (separate worker processes; the
client must not be the bottleneck).

    .venv/bin/python plugins/amqp/bench/amqp_bench.py --messages 200000 \
        --producers 2 --consumers 2 --size 1024 [--persistent] [--profile out.prof]

``--target host:port`` measures an already running broker (pass ``--pid`` for
its CPU); otherwise a RelayMQ broker with one ``amqp://`` connector is started.
RabbitMQ 3.x (bench/rabbitmq.sh) for comparison:

    ... --target 127.0.0.1:5673 --pid <beam pid> --user guest --password guest \
        --address /queue/bench --terminus-durable 2
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BROKER = r"""
import asyncio, sys, cProfile
from relaymq.testing import running_broker
async def main():
    async with running_broker(None, "amqp://127.0.0.1:0" + sys.argv[1]) as b:
        print(b.connector_address("amqp"), flush=True)
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        loop.add_reader(sys.stdin.fileno(), lambda: done.done() or done.set_result(None))
        await done
prof = sys.argv[2]
if prof:
    cProfile.run("asyncio.run(main())", prof)
else:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Worker:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "relaymq_bench.worker", json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.events: list[dict[str, Any]] = []

    def read_event(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.cfg['role']} {self.cfg['index']} died")
        ev = json.loads(line)
        if ev["event"] == "error":
            raise RuntimeError(f"worker failed: {ev}")
        return ev

    def wait(self, name: str) -> dict[str, Any]:
        while True:
            ev = self.read_event()
            if ev["event"] == name:
                return ev

    def command(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()


def collect(workers: list[Worker], total: int) -> list[dict[str, Any]]:
    """Wait for every result; competing consumers are told to stop once the
    queue's whole count has arrived (no one knows its own share in advance)."""
    results: dict[int, dict[str, Any]] = {}
    received = {id(w): 0 for w in workers}
    stopped = False
    streams = {w.proc.stdout.fileno(): w for w in workers if w.proc.stdout is not None}
    while len(results) < len(workers):
        ready, _, _ = select.select(list(streams), [], [], 1.0)
        for fd in ready:
            w = streams[fd]
            ev = w.read_event()
            if ev["event"] == "progress" and w.cfg["role"] == "consumer":
                received[id(w)] = ev.get("received", 0)
            elif ev["event"] == "result":
                results[id(w)] = ev
                del streams[fd]
                if w.cfg["role"] == "consumer":
                    received[id(w)] = ev["received"]
        if not stopped and sum(received.values()) >= total:
            stopped = True
            for w in workers:
                if w.cfg["role"] == "consumer" and id(w) not in results:
                    w.command("stop")
    return list(results.values())


def run(args: argparse.Namespace) -> dict[str, Any]:
    broker = None
    pid = args.pid
    if args.target:
        host, port = args.target.rsplit(":", 1)
    else:
        broker = subprocess.Popen([sys.executable, "-c", BROKER, args.uri_options, args.profile or ""],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert broker.stdout is not None
        host, port = broker.stdout.readline().strip().rsplit(":", 1)
        pid = broker.pid
    run_id = int(time.time()) & 0xFFFF
    per_producer = args.messages // args.producers
    total = per_producer * args.producers
    link: dict[str, Any] = {"address": args.address}
    if args.terminus_durable:
        link["durable"] = args.terminus_durable
    workers = []
    for i in range(args.consumers):
        workers.append(Worker({
            "role": "consumer", "protocol": "amqp", "host": host, "port": int(port), "index": i,
            "user": args.user, "password": args.password,
            "run_id": run_id, "link": link, "credit": args.credit, "count": total,
            "expect": total if args.consumers == 1 else None, "progress_interval": 0.1,
            "ack": "auto" if args.presettled else "client",
        }))
    for i in range(args.producers):
        workers.append(Worker({
            "role": "producer", "protocol": "amqp", "host": host, "port": int(port), "index": i,
            "user": args.user, "password": args.password,
            "run_id": run_id, "link": link, "size": args.size, "count": per_producer,
            "persistent": args.persistent, "max_inflight": args.inflight, "batch": args.batch,
        }))
    for w in workers:
        w.wait("ready")
    cpu0 = cpu_seconds(pid) if pid else None
    t0 = time.time_ns()
    for w in workers:
        w.command("go")
    results = collect(workers, total)
    t1 = max(r["t_last"] for r in results)
    cpu1 = cpu_seconds(pid) if pid else None
    for w in workers:
        w.proc.wait(10)
    if broker is not None:
        assert broker.stdin is not None
        broker.stdin.close()
        broker.wait(30)
    received = sum(r.get("received", 0) for r in results if r["role"] == "consumer")
    elapsed = (t1 - t0) / 1e9
    out = {
        "messages": total, "received": received, "size": args.size, "producers": args.producers,
        "consumers": args.consumers, "persistent": args.persistent, "seconds": round(elapsed, 3),
        "msg_per_s": round(received / elapsed) if elapsed else None,
    }
    if cpu0 is not None and cpu1 is not None:
        out["broker_cpu_s"] = round(cpu1 - cpu0, 3)
        out["broker_us_per_msg"] = round((cpu1 - cpu0) / max(received, 1) * 1e6, 2)
    out["client_cpu_s"] = round(sum(r["cpu_user"] + r["cpu_sys"] for r in results), 3)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--producers", type=int, default=2)
    p.add_argument("--consumers", type=int, default=2)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--credit", type=int, default=1000)
    p.add_argument("--inflight", type=int, default=1000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--address", default="queue://bench")
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--presettled", action="store_true", help="consumers take messages pre-settled")
    p.add_argument("--uri-options", default="", help="e.g. '?producerCredit=2000'")
    p.add_argument("--target", help="host:port of a running broker instead of starting one")
    p.add_argument("--pid", type=int, help="pid of --target, to read its CPU")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--terminus-durable", type=int, default=0,
                   help="terminus durability (RabbitMQ: 2 declares a durable /queue/X)")
    p.add_argument("--profile", help="write a cProfile of the broker to this file")
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args()
    for _ in range(args.runs):
        print(json.dumps(run(args)), flush=True)


if __name__ == "__main__":
    main()
