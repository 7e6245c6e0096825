"""Sequence ranges as Spark input partitions, read by executors from the broker."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from relaymq_spark.columns import Columns, add_encoded_many
from relaymq_spark.endpoint import Endpoint, RelayMQError
from relaymq_spark.range_read import read_encoded
from relaymq_spark.rows import columns_batch
from relaymq_spark.transfers import Encoded

if TYPE_CHECKING:
    from relaymq_spark.client import Client

#: sequence numbers per partition (option messagesPerPartition). Each partition
#: is a Spark task, and a task costs Spark about 100-200 ms of CPU whatever it
#: reads (its Python worker's set-up, our connection, the JVM's task): at 10 000
#: that was half of a batch read's CPU (docs/spark.md, "The stream's CPU, path
#: by path"). minPartitions still splits a read over the cores (set it to the
#: cluster's cores, as with Kafka).
DEFAULT_PER_PARTITION = 100_000
#: a micro-batch or batch read is split into at least this many partitions when
#: it has enough messages (option minPartitions): local[2] and a cluster's cores
#: read in parallel
DEFAULT_MIN_PARTITIONS = 2
#: the fewest messages worth a partition of their own
MIN_PER_PARTITION = 1000
#: messages per transfer the broker is asked for (relaymq-seq-batch)
BATCH = 500
#: transfers in flight (credit) while rows are built and handed over
PREFETCH = 4
#: rows per Arrow record batch handed to Spark
ROWS_PER_BATCH = 2000

log = logging.getLogger("relaymq.spark")


class RangePartition(InputPartition):  # type: ignore[misc]
    """Messages of `dest` with `after < seq <= until`."""

    def __init__(self, dest: str, after: int, until: int) -> None:
        super().__init__((dest, after, until))
        self.dest = dest
        self.after = after
        self.until = until


def split(dest: str, after: int, until: int, per_partition: int,
          min_partitions: int = 1) -> list[RangePartition]:
    """`(after, until]` in partitions of at most `per_partition` sequence numbers,
    at least `min_partitions` of them when each still gets `MIN_PER_PARTITION`."""
    total = until - after
    if total <= 0:
        return []
    parts = max(-(-total // per_partition), min(min_partitions, total // MIN_PER_PARTITION), 1)
    step = -(-total // parts)
    out = []
    lo = after
    while lo < until:
        hi = min(until, lo + step)
        out.append(RangePartition(dest, lo, hi))
        lo = hi
    return out


def read_range(endpoint: Endpoint, part: RangePartition, columns: list[tuple[str, str]],
               schema: Any, fail_on_loss: bool = True) -> Iterator[Any]:
    """The rows of one partition as Arrow record batches (`schema`: the Arrow
    schema). One connection reads the whole partition, `BATCH` messages per
    transfer, on this thread: each transfer is decoded into the columns as it
    arrives (`range_read`), and the read pauses while a full record batch is
    handed to Spark; credit keeps at most `PREFETCH` transfers in flight
    (bounded executor memory)."""
    dest = part.dest
    names = [n for n, _ in columns]
    cols = [Columns(names)]

    def take(records: list[Encoded]) -> None:
        add_encoded_many(cols[0], dest, records)

    def full() -> bool:
        return len(cols[0]) >= ROWS_PER_BATCH

    reads = read_encoded(endpoint, dest, part.after, part.until, take, batch=BATCH,
                         prefetch=PREFETCH, fail_on_loss=fail_on_loss, pause=full)
    try:
        for _ in reads:
            done, cols[0] = cols[0], Columns(names)
            yield columns_batch(done, columns, schema)
    finally:
        reads.close()  # Spark may stop early: the connection closes now, not when collected
    if len(cols[0]):
        yield columns_batch(cols[0], columns, schema)


def resolve_start(client: Client, dest: str, wanted: str | int,
                  fail_on_loss: bool = True) -> int:
    """The sequence number a read starts after: `earliest`, `latest` or a number
    (checked against what the broker still holds: one older than that fails, or,
    with ``failOnDataLoss=false``, starts at the earliest held, as Kafka does)."""
    first, last = client.bounds(dest)
    if wanted == "earliest":
        return first - 1
    if wanted == "latest":
        return last
    n = int(wanted)
    if n < first - 1:
        if fail_on_loss:
            raise RelayMQError(
                f"{dest}: offset {n} is older than what the broker retains (it holds sequence "
                f"numbers {first}..{last}; {first - 1} or later can be read): the messages after "
                f"{n} were released (committed by a query, consumed, or expired)")
        log.warning("%s: offset %d is older than what the broker retains (it holds sequence "
                    "numbers %d..%d): failOnDataLoss=false, starting after %d", dest, n, first,
                    last, first - 1)
        return first - 1
    if n > last:
        raise RelayMQError(f"{dest}: offset {n} is beyond the last sequence number {last}")
    return n
