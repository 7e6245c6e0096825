"""A process that writes to a kahaDB store until it is killed (tests/test_crash.py).

    python crash_worker.py DIRECTORY SEED [STRATEGY]

Concurrent producer tasks write batches of adds (and removes of messages they
added earlier) and print one line per operation *after* its write completed:
``A <key> <seq>`` or ``R <key> <seq>``. Whatever is printed was acknowledged
as durable. Before a removal is written it prints ``r <key> <seq>``: from then
on the message may be gone even if the ``R`` never made it out. Removing the
whole destination TMP prints ``d <key> <upto>`` before and ``D <key> <upto>``
after: every message of it up to that sequence is gone; the parent kills this process with SIGKILL at a random moment and
checks the store against the printed lines. Cleanup and compaction run often,
so kills also land in the middle of them.
"""

from __future__ import annotations

import asyncio
import random
import sys

from relaymq.model.message import Message
from relaymq.spi.persistence import (
    AddDestination,
    AddMessage,
    AddSubscription,
    RemoveDestination,
    RemoveMessage,
    RemoveMessages,
    StoreOp,
    SubscriptionRecord,
)
from relaymq_kahadb import KahaDBConfig, KahaDBPersistenceAdapter

QUEUES = ["queue://crash.a", "queue://crash.b", "queue://crash.c"]
TMP = "queue://crash.tmp"  # removed and recreated now and then
SUB = SubscriptionRecord("crash-client", "sub", "topic://crash.t", selector="n > 0")
KEYS = QUEUES + [SUB.key, TMP]


def body(key: str, seq: int, rng: random.Random) -> bytes:
    return f"{key}:{seq}:".encode() + b"x" * rng.randrange(10, 3000)


async def main(directory: str, seed: int, strategy: str) -> None:
    rng = random.Random(seed)
    store = KahaDBPersistenceAdapter(KahaDBConfig(
        directory=directory, journal_max_file_length=128 << 10, journal_disk_sync_strategy=strategy,
        checkpoint_interval=150, cleanup_interval=200, compact_acks_after_no_gc=1,
        compaction_threshold=0.6, preallocation_strategy=rng.choice(["sparse_file", "zeros"])))
    await store.start()
    await store.write([*(AddDestination(q) for q in QUEUES), AddSubscription(SUB)])
    last = {k: (await store.stats(k)).last_seq for k in KEYS}
    live: dict[str, list[int]] = {k: [m.seq for m in await store.read(k)] for k in KEYS}
    out = sys.stdout

    async def dropper() -> None:
        r = random.Random(seed)
        while True:
            await asyncio.sleep(r.uniform(0.02, 0.15))
            upto = last[TMP]
            out.write(f"d {TMP} {upto}\n")
            out.flush()
            live[TMP] = []
            await store.write([RemoveDestination(TMP)])
            out.write(f"D {TMP} {upto}\n")
            out.flush()
            await store.write([AddDestination(TMP)])

    async def producer(p: int) -> None:
        r = random.Random(seed * 1000 + p)
        while True:
            ops: list[StoreOp] = []
            lines = []
            for _ in range(r.randrange(1, 5)):
                key = r.choice(KEYS)
                last[key] += 1
                seq = last[key]
                ops.append(AddMessage(key, seq, Message(body(key, seq, r), message_id=f"{key}:{seq}")))
                lines.append(f"A {key} {seq}\n")
            runs: dict[str, list[int]] = {}
            for _ in range(r.randrange(0, 6)):
                key = r.choice(KEYS)
                if len(live[key]) > 20 and key != TMP:
                    seq = live[key].pop(r.randrange(0, len(live[key]) // 2))
                    runs.setdefault(key, []).append(seq)
                    lines.append(f"R {key} {seq}\n")
            for key, seqs in runs.items():  # as the broker's acks (REMOVE_RUN) or one by one
                if r.random() < 0.5:
                    ops.append(RemoveMessages(key, tuple(seqs)))
                else:
                    ops.extend(RemoveMessage(key, seq) for seq in seqs)
            intents = [f"r{line[1:]}" for line in lines if line[0] == "R"]
            if intents:
                out.write("".join(intents))
                out.flush()
            await store.write(ops)
            for op in ops:
                if isinstance(op, AddMessage):
                    live[op.dest].append(op.seq)
            out.write("".join(lines))
            out.flush()

    await asyncio.gather(dropper(), *(producer(p) for p in range(16)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "always"))
