"""`format("relaymq")`: the data source (batch and streaming reads, writes)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

import relaymq_spark.options as opt
from relaymq_spark.client import Client
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


class RelayMQDataSource(DataSource):  # type: ignore[misc]
    """RelayMQ destinations by sequence number (docs/spark.md)."""

    @classmethod
    def name(cls) -> str:
        return "relaymq"

    def schema(self) -> str:
        return schema_for(property_columns(self.options.get("propertyColumns")))

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from relaymq_spark.stream import StreamReader

        return StreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from relaymq_spark.sink import BatchWriter

        return BatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from relaymq_spark.sink import StreamWriter

        return StreamWriter(self.options, schema)


class BatchReader(DataSourceReader):  # type: ignore[misc]
    """`spark.read.format("relaymq")`: a live destination by sequence range
    (`startingOffsets`, `endingOffsets`: earliest/latest or per destination)."""

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
        self.starting = opt.starting_offsets(options.get("startingOffsets"), self.dests)
        self.fail_on_loss = opt.flag(options, "failOnDataLoss", True)
        self.ending = opt.starting_offsets(options.get("endingOffsets"), self.dests,
                                           default="latest", name="endingOffsets")

    def partitions(self) -> Sequence[InputPartition]:
        client = Client(self.endpoint)
        parts: list[InputPartition] = []
        for d in self.dests:
            after = resolve_start(client, d, self.starting[d], self.fail_on_loss)
            until = resolve_start(client, d, self.ending[d], self.fail_on_loss) \
                if self.ending[d] != "earliest" \
                else after
            parts.extend(split(d, after, until, self.per_partition,
                               self.min_partitions))
        return parts or [RangePartition(self.dests[0], 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RangePartition)
        settle()
        return read_range(self.endpoint, partition, self.columns, arrow_schema(self.schema),
                          self.fail_on_loss)
