"""`spark.readStream.format("relaymq")`: exactly-once by replayable offsets.

Offsets are ``{destination key: sequence number}``. A micro-batch is the range
``(start, end]`` of each destination, split into partitions that executors read
straight from the broker (relaymq_amqp.ranges); reading never consumes, so a
batch re-run after a crash reads the same messages. What the query committed is
released (`Management.release_through`): by `commit(end)`, which Spark calls for
a batch when it plans the next one, and by `latestOffset(start)`, which it calls
only once the batch ending at `start` is committed (so the last batch of an
availableNow run, or of a stream that went quiet, is released too). The broker
keeps everything after the last commit, across broker and driver crashes.

`trigger(availableNow=True)`: the reader implements `SupportsTriggerAvailableNow`.
Without it Spark does not run an availableNow query to the end: it falls back
to a single micro-batch (after a crash that is only the re-run of the batch
that was planned but not committed). `prepareForTriggerAvailableNow` records
each destination's last sequence number as the target; `latestOffset` never
goes past it and still takes at most `maxMessagesPerTrigger` per batch, so the
query reads everything up to the target in several batches, then stops.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

# pyspark >= 4.2 (the distribution's requirement): admission control
# (maxMessagesPerTrigger) and Trigger.AvailableNow
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

import relaymq_spark.options as opt
from relaymq_spark.client import Client, check_loss
from relaymq_spark.projection import check_projection
from relaymq_spark.ranges import (
    DEFAULT_MIN_PARTITIONS,
    DEFAULT_PER_PARTITION,
    RangePartition,
    read_range,
    resolve_start,
    split,
)
from relaymq_spark.rows import arrow_schema, property_columns, schema_for
from relaymq_spark.worker_gc import settle


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opt.check_names(options, opt.READ_OPTIONS, "relaymq")
        self.endpoint = opt.endpoint(options)
        self.dests = opt.destinations(options)
        self.columns = property_columns(options.get("propertyColumns"))
        self.per_partition = opt.positive_int(options, "messagesPerPartition",
                                              DEFAULT_PER_PARTITION) or DEFAULT_PER_PARTITION
        self.min_partitions = opt.positive_int(options, "minPartitions",
                                               DEFAULT_MIN_PARTITIONS) or 1
        check_projection(schema, schema_for(self.columns), "relaymq")
        self.schema = schema  # a StructType: pickled to executors with the reader
        self.max_per_trigger = opt.positive_int(options, "maxMessagesPerTrigger", None)
        self.starting = opt.starting_offsets(options.get("startingOffsets"), self.dests)
        self.release = str(options.get("releaseOnCommit", "true")).lower() != "false"
        self.fail_on_loss = opt.flag(options, "failOnDataLoss", True)
        #: availableNow: the last sequence number of each destination when the query
        #: started; nothing after it is read
        self.target: dict[str, int] | None = None
        #: destination -> released through this sequence number (by this reader)
        self.released: dict[str, int] = {}
        #: what `initialOffset` gave (a query without a checkpoint): a start, not a
        #: committed batch's end, so nothing is released through it
        self.initial: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        client = Client(self.endpoint)
        initial = {d: resolve_start(client, d, self.starting[d], self.fail_on_loss)
                   for d in self.dests}
        self.initial = initial
        return initial

    def getDefaultReadLimit(self) -> Any:
        if self.max_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.max_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        client = Client(self.endpoint)
        self.target = {d: client.bounds(d)[1] for d in self.dests}

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None
                     ) -> dict[str, int]:
        """The end of the next batch: what the broker holds after `start`, at most
        the read limit's rows (split evenly over the destinations), never past the
        availableNow target. pyspark without admission control calls it without
        arguments: then it is everything available."""
        budget: int | None = None
        if isinstance(limit, ReadMaxRows):
            budget = max(1, limit.max_rows // len(self.dests))
        client = Client(self.endpoint)
        if start and not self._is_initial(start):
            # Spark asks for the next batch's end only once the batch ending at
            # `start` is committed (an uncommitted one is run again first, without
            # asking), and it calls `commit` for a batch only when it plans the next
            # one: the last batch of a run, or of a quiet stream, is released here
            self._release(client, start)
        out: dict[str, int] = {}
        for d in self.dests:
            first, last = client.bounds(d)
            if self.target is not None:
                last = self.target[d]
            begin = int((start or {}).get(d, last))
            if self.fail_on_loss and start is not None and d in start:
                check_loss(d, begin, first)
            end = max(begin, last)
            if budget is not None:
                end = min(end, begin + budget)
            out[d] = end
        return out

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        parts: list[InputPartition] = []
        for d in self.dests:
            lo = int(start.get(d, end.get(d, 0)))
            parts.extend(split(d, lo, int(end.get(d, lo)), self.per_partition,
                               self.min_partitions))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        settle()
        return read_range(self.endpoint, partition, self.columns, arrow_schema(self.schema),
                          self.fail_on_loss)

    def _is_initial(self, start: Mapping[str, Any]) -> bool:
        """`start` is where a new query starts (`startingOffsets`), no batch's end:
        messages before it are not the query's to release."""
        initial = self.initial
        return initial is not None and all(int(start.get(d, -1)) == initial[d] for d in initial)

    def commit(self, end: dict[str, int]) -> None:
        self._release(Client(self.endpoint), end)

    def _release(self, client: Client, upto: Mapping[str, Any]) -> None:
        """Release what the query committed, through `upto` (once per position)."""
        if not self.release:
            return
        for d, seq in upto.items():
            n = int(seq)
            if d in self.dests and n > 0 and n > self.released.get(d, 0):
                client.release(d, n)
                self.released[d] = n
