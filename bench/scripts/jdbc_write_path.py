"""The JDBC store's write path alone: CPU per message, messages per commit.

    .venv/bin/python bench/scripts/jdbc_write_path.py [--db sqlite|postgresql]
        [--messages 40000] [--producers 32] [--batch 1] [--size 1024] [--runs 1] [--profile]

No transport and no kernel: `--producers` coroutines each store persistent
1 KiB messages, `--batch` per `write()` (1: one at a time; the kernel hands the
store everything sent in one event-loop turn as one write, typically tens of
messages under load), then acknowledge them the same way (RemoveMessage), on a
`JDBCPersistenceAdapter` over SQLite (a file in a temporary directory) or a
private PostgreSQL (`relaymq_jdbc.testing.PostgresCluster`, fsync on).

Reports the process CPU (`time.process_time`: the event loop, the writer
thread and the driver; not the database server) per message for the store and
the acknowledge phase, msg/s, and the writer's commits and store writes per
commit; with `--runs N` each run on a fresh store, and the best (lowest CPU)
of each phase. `--profile` profiles the event loop and the writer thread (cProfile)
and prints the top functions of each (by thread CPU time).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import shutil
import tempfile
import time
from pathlib import Path

from relaymq.model.message import Message
from relaymq.spi.persistence import AddMessage, RemoveMessage, StoreOp
from relaymq_jdbc import JDBCPersistenceAdapter
from relaymq_jdbc import writer as writer_module


async def run(url: str, args: argparse.Namespace, writer_profile: cProfile.Profile | None,
              loop_profile: cProfile.Profile | None) -> dict[str, float]:
    store = JDBCPersistenceAdapter(url=url, use_lock=False, cleanup_period=0)
    await store.start()
    per = args.messages // args.producers
    total = per * args.producers
    body = b"x" * args.size
    try:
        st = store._writer.stats  # type: ignore[union-attr]

        batch = max(1, args.batch)

        async def producer(n: int, remove: bool) -> None:
            dest = f"queue://bench.{n % 4}"
            for start in range(0, per, batch):
                ops: list[StoreOp] = []
                for i in range(start, min(per, start + batch)):
                    seq = n * per + i + 1
                    if remove:
                        ops.append(RemoveMessage(dest, seq))
                    else:
                        m = Message(body, durable=True, message_id=f"ID:bench-{n}:1:1:{i}")
                        ops.append(AddMessage(dest, seq, m))
                await store.write(ops)

        out: dict[str, float] = {}
        for phase, remove in (("store", False), ("ack", True)):
            c0, b0 = st.commits, st.batches
            if loop_profile is not None:
                loop_profile.enable()
            cpu0, t0 = time.process_time(), time.monotonic()
            await asyncio.gather(*(producer(n, remove) for n in range(args.producers)))
            cpu1, t1 = time.process_time(), time.monotonic()
            if loop_profile is not None:
                loop_profile.disable()
            out[f"{phase}_cpu_us"] = (cpu1 - cpu0) / total * 1e6
            out[f"{phase}_rate"] = total / (t1 - t0)
            out[f"{phase}_commits"] = st.commits - c0
            out[f"{phase}_per_commit"] = (st.batches - b0) / max(1, st.commits - c0)
        out["messages"] = total
        return out
    finally:
        await store.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--messages", type=int, default=40000)
    ap.add_argument("--producers", type=int, default=32)
    ap.add_argument("--batch", type=int, default=1, help="messages per write()")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="relaymq-jdbc-path-"))
    os.chmod(work, 0o755)
    cluster = None
    # timed by each thread's own CPU clock: on a shared, loaded machine wall time
    # would mostly measure waiting for a core
    writer_profile = cProfile.Profile(time.thread_time) if args.profile else None
    loop_profile = cProfile.Profile(time.thread_time) if args.profile else None
    if writer_profile is not None:
        original = writer_module.GroupWriter._run

        def profiled(self: writer_module.GroupWriter) -> None:
            writer_profile.runcall(original, self)

        writer_module.GroupWriter._run = profiled  # type: ignore[method-assign]
    try:
        if args.db == "postgresql":
            from relaymq_jdbc.testing import PostgresCluster

            (work / "pg").mkdir()
            cluster = PostgresCluster(work / "pg").start()
        results = []
        for n in range(args.runs):
            if cluster is not None:
                url = cluster.url(cluster.create_database(f"bench{n}"))
            else:
                url = f"sqlite:///{work}/store{n}.sqlite"
            results.append(asyncio.run(run(url, args, writer_profile, loop_profile)))
        r = dict(results[0])
        for phase in ("store", "ack"):
            best = min(results, key=lambda x: x[phase + "_cpu_us"])
            for k in ("cpu_us", "rate", "commits", "per_commit"):
                r[f"{phase}_{k}"] = best[f"{phase}_{k}"]
        if args.runs > 1:
            for phase in ("store", "ack"):
                print(f"  {phase} CPU µs/msg per run: "
                      + ", ".join(f"{x[phase + '_cpu_us']:.1f}" for x in results))
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    from relaymq import compiled

    print(f"{args.db}, {r['messages']:.0f} x {args.size} B, {args.producers} producers, "
          f"{args.batch} per write, best of {args.runs}, "
          f"build: relaymq {compiled.status().get('relaymq', '?')}")
    for phase in ("store", "ack"):
        print(f"  {phase}: {r[phase + '_rate']:.0f} msg/s, {r[phase + '_cpu_us']:.1f} µs CPU/msg, "
              f"{r[phase + '_commits']:.0f} commits, {r[phase + '_per_commit']:.1f} messages/commit")
    for name, prof in (("event loop", loop_profile), ("writer thread", writer_profile)):
        if prof is not None:
            print(f"\n--- {name} ---")
            pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
