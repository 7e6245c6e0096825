"""Exactly-once sink: a replayable file stream into a RelayMQ queue, the driver
killed with SIGKILL mid-stream and restarted on the same checkpoint; the queue
holds every row exactly once (the broker dropped the re-sent ids)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from driver_runs import kill_twice_then_finish, thirds
from relaymq_spark.client import Client, Endpoint

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1500)]


def test_sink_exactly_once_with_driver_killed_twice(spark, broker, tmp_path: Path) -> None:
    files, per_file = 16, 500
    data, staging = tmp_path / "in", tmp_path / "staging"
    data.mkdir()
    staging.mkdir()

    def feed(stage: int) -> None:  # files appear whole (renamed into the stream's folder)
        start, n = thirds(files, stage)
        for f in range(start, start + n):
            ns = list(range(f * per_file, (f + 1) * per_file))
            part = staging / f"part-{f:03}.parquet"
            pq.write_table(pa.table({"n": pa.array(ns, pa.int64()),
                                     "body": [f"row-{n}" for n in ns]}), part)
            part.rename(data / part.name)

    checkpoint = tmp_path / "checkpoint"
    args = ["sink", broker.url, "SUNK", str(data), str(checkpoint)]
    kill_twice_then_finish(args, "0", checkpoint, tmp_path / "driver.log", feed)

    client = Client(Endpoint(broker.url))
    first, last = client.bounds("SUNK")
    got = client.read("SUNK", 0, last)
    bodies = sorted(m.body for _, m in got)
    total = files * per_file
    assert len(bodies) == total, f"{len(bodies)} messages for {total} rows"
    assert bodies == sorted(f"row-{n}" for n in range(total))
    assert all(m.durable for _, m in got)
    assert {m.properties["n"] for _, m in got} == set(range(total))
