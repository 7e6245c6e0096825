"""The JDBC store's write path alone: CPU per message, messages per commit.

    .venv/bin/python bench/scripts/jdbc_write_path.py [--db sqlite|postgresql]
        [--messages 40000] [--producers 32] [--size 1024] [--profile]

No transport and no kernel: `--producers` coroutines each store persistent
1 KiB messages one `write()` at a time (as the kernel does for a persistent
send), then acknowledge them the same way (RemoveMessage), on a
`JDBCPersistenceAdapter` over SQLite (a file in a temporary directory) or a
private PostgreSQL (`relaymq_jdbc.testing.PostgresCluster`, fsync on).

Reports the process CPU (`time.process_time`: the event loop, the writer
thread and the driver; not the database server) per message for the store and
the acknowledge phase, msg/s, and the writer's commits and store writes per
commit. `--profile` profiles the event loop and the writer thread (cProfile)
and prints the top functions of each.
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
from relaymq.spi.persistence import AddMessage, RemoveMessage
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

        async def producer(n: int, remove: bool) -> None:
            dest = f"queue://bench.{n % 4}"
            for i in range(per):
                seq = n * per + i + 1
                if remove:
                    await store.write([RemoveMessage(dest, seq)])
                else:
                    m = Message(body, durable=True, message_id=f"ID:bench-{n}:1:1:{i}")
                    await store.write([AddMessage(dest, seq, m)])

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
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="relaymq-jdbc-path-"))
    os.chmod(work, 0o755)
    cluster = None
    writer_profile = cProfile.Profile() if args.profile else None
    loop_profile = cProfile.Profile() if args.profile else None
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
            url = cluster.url(cluster.create_database("bench"))
        else:
            url = f"sqlite:///{work}/store.sqlite"
        r = asyncio.run(run(url, args, writer_profile, loop_profile))
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    from relaymq import compiled

    print(f"{args.db}, {r['messages']:.0f} x {args.size} B, {args.producers} producers, "
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
