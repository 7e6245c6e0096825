"""Two readers on one queue: when messages a streaming query has not read yet are
removed by someone else (another query's release, a consumer, a purge), the
query fails with a clear error instead of silently missing them
(`failOnDataLoss`, Kafka's option of that name); `failOnDataLoss=false` skips
them and goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Message
from relaymq_spark.client import Client, Endpoint

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def send(url: str, start: int, count: int) -> None:
    assert Client(Endpoint(url)).send(
        Message(body=f"m{i}", address="queue://SHARED", durable=True)
        for i in range(start, start + count)) == count


def run(spark, url: str, checkpoint: Path, out: Path, **options: str):
    query = (spark.readStream.format("relaymq").option("url", url)
             .option("destination", "SHARED").option("releaseOnCommit", "false")
             .options(**options).load().select("sequence")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        query.awaitTermination(300)  # raises the query's error when it failed
    except Exception as exc:  # noqa: BLE001 - the failure is what the caller checks
        return exc
    finally:
        query.stop()
    assert not query.isActive, "the availableNow query did not end by itself"
    return None


def test_messages_taken_by_another_reader_fail_the_query(spark, broker, tmp_path: Path) -> None:
    checkpoint, out = tmp_path / "chk", tmp_path / "out"
    send(broker.url, 0, 1000)
    assert run(spark, broker.url, checkpoint, out) is None
    send(broker.url, 1000, 1000)
    # another query on the same queue committed (released) all 2000 meanwhile
    Client(Endpoint(broker.url)).release("SHARED", 2000)
    send(broker.url, 2000, 500)
    error = run(spark, broker.url, checkpoint, out)
    assert error is not None
    assert "up to 2000 were removed before this query read them" in str(error)
    assert sorted(r.sequence for r in spark.read.parquet(str(out)).collect()) == \
        list(range(1, 1001))
    # told to skip what is gone, the query goes on with what the broker still holds
    assert run(spark, broker.url, checkpoint, out, failOnDataLoss="false") is None
    assert sorted(r.sequence for r in spark.read.parquet(str(out)).collect()) == \
        list(range(1, 1001)) + list(range(2001, 2501))
