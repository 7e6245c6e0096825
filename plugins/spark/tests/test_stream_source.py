"""Exactly-once streaming source: a queue -> Parquet with a checkpoint, the driver
killed with SIGKILL mid-stream and restarted on the same checkpoint."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from driver_runs import fill, kill_twice_then_finish, thirds
from relaymq_spark.client import Client, Endpoint

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1500)]


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
