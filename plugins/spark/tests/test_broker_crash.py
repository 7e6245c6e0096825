"""A streaming query while the broker is killed with SIGKILL and restarted: the
executors' reads and the driver's requests retry, the query goes on, and the
output is still exactly once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from driver_runs import committed_batches, fill
from relaymq.testing.waits import wait_until
from relaymq_spark.client import Client, Endpoint

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1500)]


def test_stream_survives_broker_kill(spark, broker, tmp_path: Path) -> None:
    count = 6000
    fill(broker.url, "CRASH", count)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = (spark.readStream.format("relaymq").option("url", broker.url)
             .option("destination", "CRASH").option("maxMessagesPerTrigger", "500")
             .option("retryTimeout", "120").load()
             .select("sequence", "body_string")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).start())
    try:
        wait_until(lambda: committed_batches(checkpoint) >= 2 or query.exception() is not None,
                   "two committed micro-batches", timeout=300, interval=0.2)
        broker.kill()
        restarter = threading.Timer(2.0, broker.start)
        restarter.start()
        restarter.join()

        def done() -> bool:
            if query.exception() is not None:
                raise AssertionError(f"the query failed: {query.exception()}")
            return Client(Endpoint(broker.url)).bounds("CRASH")[0] > count - 500 and \
                not query.status["isTriggerActive"] and \
                spark.read.parquet(str(out)).count() >= count

        wait_until(done, "every message in the output", timeout=600, interval=1.0)
    finally:
        query.stop()
    seqs = sorted(r.sequence for r in spark.read.parquet(str(out)).collect())
    assert seqs == list(range(1, count + 1))
