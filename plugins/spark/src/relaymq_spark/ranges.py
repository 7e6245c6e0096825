"""Sequence ranges as Spark input partitions, read by executors from the broker."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import InputPartition

from relaymq_spark.client import Client, Endpoint, RelayMQError
from relaymq_spark.columns import Columns, add_encoded_many
from relaymq_spark.rows import columns_batch

DEFAULT_PER_PARTITION = 10_000
#: a micro-batch or batch read is split into at least this many partitions when
#: it has enough messages (option minPartitions): local[2] and a cluster's cores
#: read in parallel
DEFAULT_MIN_PARTITIONS = 2
#: the fewest messages worth a partition of their own
MIN_PER_PARTITION = 1000
#: messages per transfer the broker is asked for (relaymq-seq-batch)
BATCH = 500
#: transfers read ahead of the rows being built
DEPTH = 8
#: rows per Arrow record batch handed to Spark
ROWS_PER_BATCH = 2000


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


class _Stopped(Exception):
    """The partition's consumer went away: the reading thread ends."""


_END = object()


def read_range(endpoint: Endpoint, part: RangePartition, columns: list[tuple[str, str]],
               schema: Any, fail_on_loss: bool = True) -> Iterator[Any]:
    """The rows of one partition as Arrow record batches (`schema`: the Arrow
    schema). One connection reads the whole partition, `BATCH` messages per
    transfer, in a thread that stays at most `DEPTH` transfers ahead of the
    rows built here (bounded executor memory)."""
    feed: queue.Queue[Any] = queue.Queue(maxsize=DEPTH)
    stop = threading.Event()

    def put(item: Any) -> None:
        while not stop.is_set():
            try:
                feed.put(item, timeout=0.5)
                return
            except queue.Full:
                continue
        raise _Stopped

    def fetch() -> None:
        try:
            Client(endpoint).read_encoded(part.dest, part.after, part.until, put, batch=BATCH,
                                          fail_on_loss=fail_on_loss)
            put(_END)
        except _Stopped:
            return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            with contextlib.suppress(_Stopped):
                put(exc)

    reader = threading.Thread(target=fetch, name=f"relaymq-read-{part.dest}", daemon=True)
    reader.start()
    dest = part.dest
    names = [n for n, _ in columns]
    try:
        cols = Columns(names)
        while True:
            item = feed.get()
            if item is _END:
                break
            if isinstance(item, BaseException):
                raise item
            add_encoded_many(cols, dest, item)
            if len(cols) >= ROWS_PER_BATCH:
                yield columns_batch(cols, columns, schema)
                cols = Columns(names)
        if len(cols):
            yield columns_batch(cols, columns, schema)
    finally:
        stop.set()
        reader.join(5)


def resolve_start(client: Client, dest: str, wanted: str | int) -> int:
    """The sequence number a read starts after: `earliest`, `latest` or a number
    (checked against what the broker still holds)."""
    first, last = client.bounds(dest)
    if wanted == "earliest":
        return first - 1
    if wanted == "latest":
        return last
    n = int(wanted)
    if n < first - 1:
        raise RelayMQError(
            f"{dest}: offset {n} is older than what the broker retains (it holds sequence "
            f"numbers {first}..{last}; {first - 1} or later can be read): the messages after "
            f"{n} were released (committed by a query, consumed, or expired)")
    if n > last:
        raise RelayMQError(f"{dest}: offset {n} is beyond the last sequence number {last}")
    return n
