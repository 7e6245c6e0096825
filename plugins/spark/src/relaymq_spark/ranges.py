"""Sequence ranges as Spark input partitions, read by executors from the broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import InputPartition

from relaymq_spark.client import Client, Endpoint, RelayMQError
from relaymq_spark.rows import message_row

DEFAULT_PER_PARTITION = 20_000
#: messages per connection inside one partition (bounded executor memory)
CHUNK = 5000


class RangePartition(InputPartition):  # type: ignore[misc]
    """Messages of `dest` with `after < seq <= until`."""

    def __init__(self, dest: str, after: int, until: int) -> None:
        super().__init__((dest, after, until))
        self.dest = dest
        self.after = after
        self.until = until


def split(dest: str, after: int, until: int, per_partition: int) -> list[RangePartition]:
    out = []
    lo = after
    while lo < until:
        hi = min(until, lo + per_partition)
        out.append(RangePartition(dest, lo, hi))
        lo = hi
    return out


def read_range(endpoint: Endpoint, part: RangePartition,
               columns: list[tuple[str, str]]) -> Iterator[tuple[Any, ...]]:
    """The rows of one partition, read from the broker in chunks."""
    client = Client(endpoint)
    lo = part.after
    while lo < part.until:
        hi = min(part.until, lo + CHUNK)
        rows: list[tuple[Any, ...]] = []
        add = rows.append
        dest = part.dest

        def collect(seq: int, m: Any, add: Any = add, dest: str = dest) -> None:
            add(message_row(dest, seq, m, columns))

        client.read_into(dest, lo, hi, collect, prefetch=1000)
        yield from rows
        lo = hi


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
