"""Exactly-once streaming source: a queue -> Parquet with a checkpoint, the driver
killed with SIGKILL mid-stream and restarted on the same checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from proton import Message
from relaymq.testing.waits import wait_until
from relaymq_spark.client import Client, Endpoint

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1500)]

DRIVER = str(Path(__file__).with_name("stream_driver.py"))


def fill(url: str, dest: str, count: int, start: int = 0) -> None:
    sent = Client(Endpoint(url)).send(
        Message(body=f"msg-{i}", address=f"queue://{dest}", id=f"id-{i}", durable=True)
        for i in range(start, start + count))
    assert sent == count


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def start_driver(*args: str, log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - the child writes it until it ends
    try:
        return subprocess.Popen([sys.executable, DRIVER, *args], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    finally:
        out.close()


def kill_driver(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the driver: its Python process and its JVM (one process group)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def run_to_end(args: list[str], log: Path, timeout: float = 300) -> None:
    proc = start_driver(*args, log=log)
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_driver(proc)
        raise AssertionError(f"driver did not finish: {log.read_text()[-3000:]}") from None
    assert rc == 0, log.read_text()[-5000:]


def kill_twice_then_finish(args: list[str], most: str, checkpoint: Path, log: Path,
                           feed: Callable[[int], None]) -> None:
    """Start the driver, SIGKILL it after two more committed micro-batches, twice;
    then run it on the same checkpoint until everything available is done.

    `feed(stage)` adds input before each start (stages 0, 1, 2): each stage must
    add at least two micro-batches' worth, so the two commits a kill waits for
    always come, however far a run got before it was killed (a driver that had
    read everything would otherwise wait for commits that never come)."""
    for stage in range(2):
        feed(stage)
        before = committed_batches(checkpoint)
        proc = start_driver(*args, "run", most, log=log)
        try:
            def progressed(proc: subprocess.Popen[bytes] = proc, before: int = before) -> bool:
                return committed_batches(checkpoint) >= before + 2 or proc.poll() is not None

            wait_until(progressed, "two more committed micro-batches", timeout=240, interval=0.2)
            assert proc.poll() is None, log.read_text()[-5000:]
        finally:
            kill_driver(proc)
    feed(2)
    run_to_end([*args, "finish", most], log)


def thirds(total: int, stage: int) -> tuple[int, int]:
    """`(start, count)` of the stage-th of three consecutive parts of range(total)."""
    bounds = [0, total // 3, 2 * total // 3, total]
    return bounds[stage], bounds[stage + 1] - bounds[stage]


def test_source_exactly_once_with_driver_killed_twice(spark, broker, tmp_path: Path) -> None:
    # RELAYMQ_SPARK_COUNT=100000: the full size (docs/spark.md, "Tests")
    count = int(os.environ.get("RELAYMQ_SPARK_COUNT", "12000"))
    assert count >= 6000, "each of the three runs needs at least two micro-batches"
    most = max(1000, count // 12)  # about 12 micro-batches whatever the size
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    args = ["source", broker.url, "EXACT", str(out), str(checkpoint)]

    def feed(stage: int) -> None:
        start, n = thirds(count, stage)
        fill(broker.url, "EXACT", n, start)

    kill_twice_then_finish(args, str(most), checkpoint, tmp_path / "driver.log", feed)

    rows = spark.read.parquet(str(out)).collect()  # committed files only (_spark_metadata)
    seqs = sorted(r.sequence for r in rows)
    assert len(seqs) == count, f"{len(seqs)} rows for {count} messages"
    assert seqs == list(range(1, count + 1))  # every message, exactly once
    assert sorted(r.body_string for r in rows) == sorted(f"msg-{i}" for i in range(count))
    # the broker released what the query committed, and only that
    first, last = Client(Endpoint(broker.url)).bounds("EXACT")
    assert last == count
    offsets = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert first > 1, "nothing was released"
    committed_end = json.loads((checkpoint / "offsets" / str(offsets[-1])).read_text()
                               .splitlines()[-1])
    assert first - 1 <= list(committed_end.values())[0]
