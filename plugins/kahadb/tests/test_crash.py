"""Crash tests with a real process killed by SIGKILL at random moments.

Every write the worker printed as complete must survive, with its bytes (unless
the worker had started to remove it); every removal it printed as complete must
stay removed; nothing unacknowledged may show up with
wrong bytes. Kills land during group commits, file roll-overs, checkpoints,
cleanup and compaction (the worker runs them every few hundred ms).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from relaymq_kahadb import KahaDBConfig, KahaDBPersistenceAdapter

WORKER = Path(__file__).with_name("crash_worker.py")


def run_and_kill(directory: Path, seed: int, strategy: str, lifetime: float) -> list[str]:
    proc = subprocess.Popen([sys.executable, str(WORKER), str(directory), str(seed), strategy],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    chunks: list[bytes] = []

    def pump() -> None:
        assert proc.stdout is not None
        while data := proc.stdout.read1(65536):  # type: ignore[attr-defined]
            chunks.append(data)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not chunks and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)  # wait until it writes (start-up and recovery done)
    time.sleep(lifetime)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    t.join()
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.returncode == -signal.SIGKILL, f"worker died on its own:\n{err}"
    text = b"".join(chunks).decode()
    return text.split("\n")[:-1]  # the last piece may be a torn line


async def check(directory: Path, added: dict[tuple[str, int], None], removed: set[tuple[str, int]],
                maybe_removed: set[tuple[str, int]], dropped: dict[str, int],
                maybe_dropped: dict[str, int]) -> int:
    store = KahaDBPersistenceAdapter(KahaDBConfig(directory=str(directory), cleanup_interval=0,
                                                  checkpoint_interval=0, cleanup_on_stop=False))
    await store.start()
    try:
        present: dict[tuple[str, int], bytes] = {}
        copies: Counter[tuple[str, int]] = Counter()  # every record read back, counted
        ids: Counter[str | None] = Counter()
        for key in {k for k, _ in added} | {k for k, _ in removed} | set(dropped):
            for m in await store.read(key):
                present[(key, m.seq)] = m.message.body
                copies[(key, m.seq)] += 1
                ids[m.message.message_id] += 1
        twice = [k for k, n in copies.items() if n > 1]
        assert not twice, f"messages stored twice: {twice[:10]} ({len(twice)})"
        twice_ids = [i for i, n in ids.items() if n > 1]
        assert not twice_ids, f"message ids stored twice: {twice_ids[:10]} ({len(twice_ids)})"
        for (key, seq), b in present.items():
            assert b.startswith(f"{key}:{seq}:".encode()), f"{key} {seq} has wrong bytes"
        missing = [k for k in added if k not in maybe_removed and k not in present
                   and k[1] > maybe_dropped.get(k[0], 0)]
        assert not missing, f"acknowledged messages lost: {missing[:10]} ({len(missing)})"
        back = [k for k in removed if k in present]
        back += [k for k in present if k[1] <= dropped.get(k[0], 0)]
        assert not back, f"acknowledged removals undone: {back[:10]} ({len(back)})"
        assert [s.key for s in await store.subscriptions()] == ["durable://crash-client:sub"]
        return len(present)
    finally:
        await store.stop()


async def crash_loop(tmp_path: Path, iterations: int, strategy: str, seed: int) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "kahadb"
    added: dict[tuple[str, int], None] = {}
    removed: set[tuple[str, int]] = set()
    maybe_removed: set[tuple[str, int]] = set()
    dropped: dict[str, int] = {}  # destination removed: everything up to this seq is gone
    maybe_dropped: dict[str, int] = {}
    total_lines = 0
    for i in range(iterations):
        lines = run_and_kill(directory, seed * 100 + i, strategy, rng.uniform(0.2, 1.2))
        total_lines += len(lines)
        for line in lines:
            op, key, seq = line.split()
            if op == "D":
                dropped[key] = max(dropped.get(key, 0), int(seq))
            elif op == "d":
                maybe_dropped[key] = max(maybe_dropped.get(key, 0), int(seq))
            elif op == "A":
                added[(key, int(seq))] = None
            elif op == "r":
                maybe_removed.add((key, int(seq)))
            else:
                removed.add((key, int(seq)))
        await check(directory, added, removed, maybe_removed, dropped, maybe_dropped)
    assert total_lines > 100 * iterations, "the worker should get real work done between kills"


async def test_kill_9_loses_nothing_acknowledged(tmp_path: Path) -> None:
    await crash_loop(tmp_path, iterations=3, strategy="always", seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["always", "periodic"])
async def test_kill_9_many_times(tmp_path: Path, strategy: str) -> None:
    """`periodic` acknowledges once the record is in the OS: a killed process loses
    nothing either (only an OS crash or power loss loses up to the sync interval)."""
    await crash_loop(tmp_path, iterations=10, strategy=strategy, seed=7 if strategy == "always" else 8)
