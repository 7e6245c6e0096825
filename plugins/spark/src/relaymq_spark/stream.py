"""`spark.readStream.format("relaymq")`: exactly-once by replayable offsets.

Offsets are ``{destination key: sequence number}``. A micro-batch is the range
``(start, end]`` of each destination, split into partitions that executors read
straight from the broker (relaymq_amqp.ranges); reading never consumes, so a
batch re-run after a crash reads the same messages. `commit(end)` releases what
the query committed (`Management.release_through`): the broker keeps everything
after the last commit, across broker and driver crashes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

import relaymq_spark.options as opt
from relaymq_spark.client import Client
from relaymq_spark.ranges import (
    DEFAULT_PER_PARTITION,
    RangePartition,
    read_range,
    resolve_start,
    split,
)
from relaymq_spark.rows import property_columns

try:  # pyspark >= 4.2: admission control (maxMessagesPerTrigger)
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
except ImportError:  # pragma: no cover - older pyspark: every trigger reads all
    ReadAllAvailable = ReadLimit = ReadMaxRows = None


class StreamReader(DataSourceStreamReader):  # type: ignore[misc]
    def __init__(self, options: dict[str, str]) -> None:
        self.endpoint = opt.endpoint(options)
        self.dests = opt.destinations(options)
        self.columns = property_columns(options.get("propertyColumns"))
        self.per_partition = opt.positive_int(options, "messagesPerPartition",
                                              DEFAULT_PER_PARTITION) or DEFAULT_PER_PARTITION
        self.max_per_trigger = opt.positive_int(options, "maxMessagesPerTrigger", None)
        self.starting = opt.starting_offsets(options.get("startingOffsets"), self.dests)
        self.release = str(options.get("releaseOnCommit", "true")).lower() != "false"

    def initialOffset(self) -> dict[str, int]:
        client = Client(self.endpoint)
        return {d: resolve_start(client, d, self.starting[d]) for d in self.dests}

    def getDefaultReadLimit(self) -> Any:
        if self.max_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.max_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None
                     ) -> dict[str, int]:
        client = Client(self.endpoint)
        budget: int | None = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            budget = max(1, limit.max_rows // len(self.dests))
        elif limit is None and self.max_per_trigger is not None:
            budget = max(1, self.max_per_trigger // len(self.dests))
        out: dict[str, int] = {}
        for d in self.dests:
            _, last = client.bounds(d)
            begin = int((start or {}).get(d, last))
            end = max(begin, last)
            if budget is not None:
                end = min(end, begin + budget)
            out[d] = end
        return out

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        parts: list[InputPartition] = []
        for d in self.dests:
            lo = int(start.get(d, end.get(d, 0)))
            parts.extend(split(d, lo, int(end.get(d, lo)), self.per_partition))
        return parts

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, RangePartition)
        return read_range(self.endpoint, partition, self.columns)

    def commit(self, end: dict[str, int]) -> None:
        if not self.release:
            return
        client = Client(self.endpoint)
        for d, seq in end.items():
            if d in self.dests and int(seq) > 0:
                client.release(d, int(seq))
