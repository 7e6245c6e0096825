"""The Spark sink's transport outside Spark: the rows of Arrow record batches
encoded by the sink (`relaymq_spark.sink.to_messages`: 1 KiB bodies, each with
its `_AMQ_DUPL_ID`) and sent by its sender (`relaymq_spark.sender.send_encoded`)
into a persistent queue of a broker of its own (`relaymq run`, kahaDB).

    .venv/bin/python bench/scripts/spark_sink_transport.py --count 40000 --rounds 5 \\
        --window 1000,4000 --connector "producerCredit=1000|producerCredit=4000"

Every combination of `--window`, `--connector` and `--policy` (one broker per
alternative, `|`-separated), `--connections` and `--kind` runs once per round,
alternating, and the medians come last: on a shared machine single runs vary
by a factor of two.
Each line: messages/s, wall time, the client's CPU (encoding and sending, this
process; not counted with `--connections` above 1) and the broker's CPU
(/proc utime+stime) per message, the load average, and from
/proc/PID/task/*/schedstat the share of the wall time the broker's threads
(summed) and the client ran and were runnable but waiting for a CPU.
`--kind`: `dupid` (the sink's messages), `nodupid` (the property renamed: the
broker sees no duplicate id), `plain` (no application properties, what
relaymq-bench sends), `fill` (python-qpid-proton's encoding of such a message,
the same bytes every time, as spark_bench.py fills its queue). `--policy "|idCacheSize=1000000"` compares the default
id cache with one that never drops an id.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "spark" / "tests"))

import pyarrow as pa  # noqa: E402
from brokers import BrokerProcess  # noqa: E402
from relaymq_spark.endpoint import Endpoint  # noqa: E402
from relaymq_spark.sender import send_encoded  # noqa: E402
from relaymq_spark.sink import to_messages  # noqa: E402

ROWS = 2000  # rows per Arrow record batch


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sched(pid: int) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) of all threads of
    `pid` (/proc/PID/task/*/schedstat)."""
    run = wait = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "schedstat").read_text().split()
        except OSError:
            continue
        run += int(fields[0])
        wait += int(fields[1])
    return run / 1e9, wait / 1e9


def _without_properties(m: bytes) -> bytes:
    """`m` (a sink message: header, properties, application properties, body)
    without its application-properties section."""
    start = m.index(b"\x00\x53\x74")
    end = m.index(b"\x00\x53\x77", start)
    return m[:start] + m[end:]


def messages(count: int, prefix: str, size: int, kind: str) -> Iterator[bytes]:
    batch = pa.RecordBatch.from_pydict({"body": ["x" * size] * ROWS})
    msgs = to_messages(iter([batch] * (count // ROWS)), "SUNK", prefix, ["body"])
    if kind == "nodupid":
        msgs = (m.replace(b"_AMQ_DUPL_ID", b"_NOT_DUPL_ID") for m in msgs)
    elif kind == "plain":
        msgs = (_without_properties(m) for m in msgs)
    elif kind == "fill":  # what spark_bench.py fills its queue with: one message, repeated
        from proton import Message

        one = bytes(Message(body="x" * size, address="queue://SUNK", durable=True).encode())
        msgs = iter([one] * count)
    elif kind != "dupid":
        raise SystemExit(f"--kind {kind!r}: dupid, nodupid, plain or fill")
    return msgs


def _one(url: str, count: int, window: int, prefix: str, size: int, kind: str) -> int:
    return send_encoded(Endpoint(url), messages(count, prefix, size, kind), window)


def _attributes(spec: str) -> str:
    """``a=1,b=2`` as XML attributes."""
    return " ".join(f'{k.strip()}="{v.strip()}"' for k, v in
                    (item.split("=", 1) for item in spec.split(",") if item.strip()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=40_000, help="messages per run")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--window", default="1000", help="sendWindow values, comma-separated")
    ap.add_argument("--connector", default="",
                    help="AMQP connector URI options; '|' separates alternatives (a broker each)")
    ap.add_argument("--connections", default="1",
                    help="senders in parallel (forked processes, as Spark's tasks), "
                         "comma-separated alternatives; each sends count/N")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kind", default="dupid", help="dupid, nodupid, plain; comma-separated")
    ap.add_argument("--policy", default="",
                    help="policyEntry attributes for every queue; '|' separates alternatives")
    ap.add_argument("--kahadb", default="", help="kahaDB attributes, e.g. "
                    "'journalDiskSyncStrategy=\"never\"'")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sink-transport-"))
    brokers: dict[str, BrokerProcess] = {}
    try:
        for i, (opts, policy) in enumerate(itertools.product(args.connector.split("|"),
                                                              args.policy.split("|"))):
            d = work / f"b{i}"
            d.mkdir()
            persistence = (f'<kahaDB directory="{d / "kahadb"}" {args.kahadb}/>'
                           if args.kahadb else None)
            extra = ("<destinationPolicy><policyMap><policyEntries><policyEntry "
                     f'queue=">" {_attributes(policy)}/></policyEntries></policyMap>'
                     "</destinationPolicy>") if policy else ""
            name = " ".join(x for x in (opts, policy) if x) or "defaults"
            brokers[name] = BrokerProcess(d, extra=extra, persistence=persistence,
                                          connector_options=opts).start()
        for b in brokers.values():  # the queue made and the imports done, untimed
            _one(b.url, ROWS, 1000, "spark:warm:0:0", args.size, "dupid")
        combos = list(itertools.product(brokers, [int(w) for w in args.window.split(",")],
                                        [int(c) for c in args.connections.split(",")],
                                        args.kind.split(",")))
        results: dict[tuple[str, int, int, str], list[float]] = {c: [] for c in combos}
        cpu: dict[tuple[str, int, int, str], list[float]] = {c: [] for c in combos}
        me = os.getpid()
        for r in range(args.rounds):
            for combo in combos:
                opts, window, conns, kind = combo
                b = brokers[opts]
                assert b.proc is not None
                pid = b.proc.pid
                s0, m0 = sched(pid), sched(me)
                b0, c0, t0 = proc_cpu(pid), time.process_time(), time.perf_counter()
                prefix = f"spark:r{r}w{window}c{conns}{kind}{opts}"
                if conns == 1:
                    n = _one(b.url, args.count, window, prefix + ":0:0", args.size, kind)
                else:
                    with multiprocessing.get_context("fork").Pool(conns) as pool:
                        done = [pool.apply_async(_one, (
                            b.url, args.count // conns, window, f"{prefix}:0:{i}", args.size,
                            kind)) for i in range(conns)]
                        n = sum(d.get(600) for d in done)
                took = time.perf_counter() - t0
                c1, b1 = time.process_time(), proc_cpu(pid)
                s1, m1 = sched(pid), sched(me)
                results[combo].append(n / took)
                cpu[combo].append((b1 - b0) / n * 1e6)
                client = (f"client CPU {(c1 - c0) / n * 1e6:4.1f} us/msg (ran "
                          f"{(m1[0] - m0[0]) / took:.0%}, waited {(m1[1] - m0[1]) / took:.0%})"
                          if conns == 1 else "client in processes")
                print(f"{opts} window {window} x{conns} {kind}: {n / took:>8,.0f} msg/s "
                      f"{took:5.2f} s  broker CPU {(b1 - b0) / n * 1e6:4.1f} us/msg (ran "
                      f"{(s1[0] - s0[0]) / took:.0%}, waited {(s1[1] - s0[1]) / took:.0%}); "
                      f"{client}; load {os.getloadavg()[0]:.1f}", flush=True)
        for combo, rates in results.items():
            opts, window, conns, kind = combo
            print(f"median {opts} window {window} x{conns} {kind}: "
                  f"{statistics.median(rates):,.0f} msg/s (min {min(rates):,.0f}, "
                  f"max {max(rates):,.0f}, {len(rates)} runs), broker CPU "
                  f"{statistics.median(cpu[combo]):.1f} us/msg (min {min(cpu[combo]):.1f}, "
                  f"max {max(cpu[combo]):.1f})")
    finally:
        for b in brokers.values():
            b.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
