"""Benchmarks of the kahaDB store itself (no broker, no network).

    .venv/bin/python plugins/kahadb/bench_journal.py [--dir DIR] [--quick]
        [--only throughput|cpu|recovery]

* throughput: persistent 1 KiB sends from N concurrent producer tasks, each
  awaiting its write, per sync strategy: appends/s, records per fsync (group
  commit at work), CPU µs per message.
* cpu: CPU µs per persistent 1 KiB message over its whole life in the store
  (add, then remove when consumed) with 64 producers, sync always.
* recovery: write a journal of one million 1 KiB messages, then time start-up
  (a) from the checkpoint and (b) rebuilding the index from the journal alone;
  also the RSS with a million live messages.

Numbers depend on the disk; `docs/kahadb.md` has the ones measured here. This is
a benchmark, never a test: nothing here asserts timings.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import AddDestination, AddMessage, RemoveMessage
from relaymq_kahadb import KahaDBConfig, KahaDBPersistenceAdapter

BODY = os.urandom(1024)


def make_store(directory: Path, **kw: object) -> KahaDBPersistenceAdapter:
    cfg = {"directory": str(directory), "cleanup_interval": 0, "checkpoint_interval": 0}
    cfg.update(kw)
    return KahaDBPersistenceAdapter(KahaDBConfig(**cfg))  # type: ignore[arg-type]


def message(n: int) -> Message:
    return Message(BODY, destination=Destination.queue("bench"), message_id=f"ID:bench-{n}",
                   durable=True, timestamp=1_700_000_000_000)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def throughput(base: Path, strategy: str, producers: int, seconds: float,
                     remove: bool = False, **kw: object) -> dict[str, float]:
    d = base / f"tp-{strategy}-{producers}"
    shutil.rmtree(d, ignore_errors=True)
    store = make_store(d, journal_disk_sync_strategy=strategy, **kw)
    await store.start()
    await store.write([AddDestination("queue://bench")])
    seq = 0
    sent = 0
    stop = time.perf_counter() + seconds
    msgs = [message(i) for i in range(producers)]

    async def producer(p: int) -> None:
        nonlocal seq, sent
        m = msgs[p]
        while time.perf_counter() < stop:
            seq += 1
            s = seq
            await store.write([AddMessage("queue://bench", s, m)])
            if remove:
                await store.write([RemoveMessage("queue://bench", s)])
            sent += 1

    s0 = store.journal_stats()
    c0, t0 = cpu(), time.perf_counter()
    await asyncio.gather(*(producer(p) for p in range(producers)))
    c1, t1 = cpu(), time.perf_counter()
    s1 = store.journal_stats()
    await store.stop()
    shutil.rmtree(d, ignore_errors=True)
    syncs = s1["syncs"] - s0["syncs"]
    records = s1["records"] - s0["records"]
    return {
        "msgs_per_s": sent / (t1 - t0),
        "records_per_sync": records / syncs if syncs else float("nan"),
        "syncs_per_s": syncs / (t1 - t0),
        "cpu_us_per_msg": (c1 - c0) / sent * 1e6,
        "sent": sent,
    }


async def recovery(base: Path, count: int, batch: int = 64) -> dict[str, float]:
    d = base / "recovery"
    shutil.rmtree(d, ignore_errors=True)
    store = make_store(d, journal_disk_sync_strategy="never")
    await store.start()
    await store.write([AddDestination("queue://bench")])
    t0 = time.perf_counter()
    msgs = [message(i) for i in range(batch)]
    pending: list[asyncio.Future[None]] = []
    for start in range(1, count + 1, batch):
        ops = [AddMessage("queue://bench", s, msgs[s % batch])
               for s in range(start, min(start + batch, count + 1))]
        pending.append(asyncio.ensure_future(store.write(ops, sync=False)))
        if len(pending) >= 4096 // batch:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    await store.flush()
    write_s = time.perf_counter() - t0
    disk = store.size()
    await store.stop()  # writes a checkpoint
    del store
    gc.collect()

    rss0 = rss_mb()
    store = make_store(d)
    t0 = time.perf_counter()
    await store.start()
    from_ckpt = time.perf_counter() - t0
    assert (await store.stats("queue://bench")).count == count
    rss_ckpt = rss_mb()
    page = await store.read("queue://bench", after=count // 2, limit=200)
    assert len(page) == 200
    t0 = time.perf_counter()
    n = 0
    after = 0
    while n < 20_000:
        page = await store.read("queue://bench", after=after, limit=200)
        n += len(page)
        after = page[-1].seq
    page_rate = n / (time.perf_counter() - t0)
    await store.stop()
    del store, page
    gc.collect()

    (d / "index.ckpt").unlink()
    store = make_store(d)
    t0 = time.perf_counter()
    await store.start()
    rebuild = time.perf_counter() - t0
    assert (await store.stats("queue://bench")).count == count
    rss_rebuild = rss_mb()
    await store.stop()
    shutil.rmtree(d, ignore_errors=True)
    return {"messages": count, "messages_per_record": batch, "journal_mb": disk / 1e6,
            "write_s": write_s,
            "start_from_checkpoint_s": from_ckpt, "start_rebuilding_index_s": rebuild,
            "rss_before_mb": rss0, "rss_after_checkpoint_start_mb": rss_ckpt,
            "rss_after_rebuild_mb": rss_rebuild, "paged_reads_per_s": page_rate}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=None, help="where to put the stores (a real disk)")
    ap.add_argument("--quick", action="store_true", help="shorter runs, 100k-message recovery")
    ap.add_argument("--only", choices=["throughput", "cpu", "recovery"], default=None)
    args = ap.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="kahadb-bench-", dir="/var/tmp"))
    base.mkdir(parents=True, exist_ok=True)
    seconds = 1.5 if args.quick else 4.0
    print(f"# kahaDB journal benchmark in {base} (python {os.sys.version.split()[0]})")
    try:
        if args.only in (None, "throughput"):
            print("\n## persistent 1 KiB sends, each producer awaiting its write")
            print(f"{'strategy':>9} {'prealloc':>9} {'producers':>9} {'msgs/s':>9} "
                  f"{'msgs/sync':>9} {'syncs/s':>8} {'cpu µs/msg':>10}")
            for strategy in ("always", "periodic", "never"):
                for prealloc in (("sparse_file", "entire_journal"),
                                 ("zeros", "entire_journal_async")):
                    if strategy != "always" and prealloc[0] == "zeros":
                        continue
                    for producers in (1, 8, 64, 256):
                        r = await throughput(base, strategy, producers, seconds,
                                             preallocation_strategy=prealloc[0],
                                             preallocation_scope=prealloc[1])
                        print(f"{strategy:>9} {prealloc[0]:>9.9} {producers:>9} "
                              f"{r['msgs_per_s']:>9.0f} {r['records_per_sync']:>9.1f} "
                              f"{r['syncs_per_s']:>8.0f} {r['cpu_us_per_msg']:>10.1f}")
        if args.only in (None, "cpu"):
            print("\n## CPU per persistent 1 KiB message, add + remove (consumed), 64 producers")
            for strategy in ("always", "never"):
                r = await throughput(base, strategy, 64, seconds, remove=True)
                print(f"{strategy:>9}: {r['msgs_per_s']:.0f} msgs/s through the store, "
                      f"{r['cpu_us_per_msg']:.1f} µs CPU per message (add + remove), "
                      f"{r['records_per_sync']:.1f} records per sync")
        if args.only in (None, "recovery"):
            count = 100_000 if args.quick else 1_000_000
            for batch in (1, 64):
                print(f"\n## recovery of a {count}-message journal (1 KiB each, {batch} per record)")
                r = await recovery(base, count, batch)
                for k, v in r.items():
                    print(f"  {k}: {v:.2f}" if isinstance(v, float) else f"  {k}: {v}")
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
