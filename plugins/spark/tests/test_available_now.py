"""`trigger(availableNow=True)` on the streaming source: everything the broker held
when the query started, in several micro-batches of at most maxMessagesPerTrigger,
nothing sent after the start; a later run on the same checkpoint reads the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Message
from relaymq_spark.client import Client, Endpoint

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def send(url: str, dest: str, start: int, count: int) -> None:
    sent = Client(Endpoint(url)).send(
        Message(body=f"msg-{i}", address=f"queue://{dest}", id=f"id-{i}", durable=True)
        for i in range(start, start + count))
    assert sent == count


def run_available_now(spark, url: str, checkpoint: Path, on_batch=None,
                      starting: str = "earliest") -> dict[int, list[int]]:
    """One availableNow query (maxMessagesPerTrigger 1000) to its end: the
    sequence numbers each micro-batch held, by batch id."""
    batches: dict[int, list[int]] = {}

    def collect(df, batch_id: int) -> None:
        batches[batch_id] = [r.sequence for r in df.select("sequence").collect()]
        if on_batch is not None:
            on_batch(batch_id)

    query = (spark.readStream.format("relaymq").option("url", url).option("destination", "NOW")
             .option("maxMessagesPerTrigger", "1000").option("startingOffsets", starting).load()
             .writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(300), "the availableNow query did not end by itself"
    finally:
        query.stop()
    assert query.exception() is None
    return batches


def test_available_now_reads_to_the_start_target_in_limited_batches(spark, broker,
                                                                      tmp_path: Path) -> None:
    send(broker.url, "NOW", 0, 2500)
    checkpoint = tmp_path / "checkpoint"

    def send_more_during_first_batch(batch_id: int) -> None:
        if batch_id == 0:  # the query has started: its target is already fixed
            send(broker.url, "NOW", 2500, 700)

    batches = run_available_now(spark, broker.url, checkpoint, send_more_during_first_batch)
    sizes = [len(batches[b]) for b in sorted(batches)]
    assert sizes == [1000, 1000, 500], sizes  # several batches, each within the limit
    assert sorted(s for b in batches.values() for s in b) == list(range(1, 2501))
    # everything the run committed is released, its last batch too (Spark commits a
    # batch when it plans the next: the run's end asks for one more and finds none)
    assert Client(Endpoint(broker.url)).bounds("NOW") == (2501, 3200)

    # the next availableNow run on the same checkpoint reads what came after, once
    again = run_available_now(spark, broker.url, checkpoint)
    assert sorted(s for b in again.values() for s in b) == list(range(2501, 3201))
    assert all(len(b) <= 1000 for b in again.values())
    first, last = Client(Endpoint(broker.url)).bounds("NOW")
    assert last == 3200 and first > last, (first, last)  # nothing held any more

    # a new query that starts at `latest` reads nothing and takes nothing away:
    # what was there before its start is not its to release
    send(broker.url, "NOW", 3200, 50)
    fresh = run_available_now(spark, broker.url, tmp_path / "fresh", starting="latest")
    assert sum(len(b) for b in fresh.values()) == 0
    assert Client(Endpoint(broker.url)).bounds("NOW") == (3201, 3250)
