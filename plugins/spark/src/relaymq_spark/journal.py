"""`format("relaymq-journal")`: an offline kahaDB directory, one partition per
journal file (`db-N.log`).

Files are opened read-only and scanned with relaymq-kahadb's record parser; the
directory's lock is never taken or looked at, so a copy of a crashed broker's
directory, a backup, or (as a snapshot) a running broker's directory can be
read. Torn or damaged records are skipped as recovery skips them.

Options: `path` (the kahaDB directory, or `.load(path)`), `destination`
(optional: only these keys, comma-separated, `queue://X` or a bare queue name),
`what`:

* ``messages`` (default): one row per message record (ADD, MOVE, and the
  fan-out references to them), with the columns of `rows.py` plus
  `journal_file`, `journal_offset` (the record's), `op`;
* ``removals``: one row per removal: `destination`, `sequence`, `upto`
  (purges and deleted destinations remove everything up to it; null for a single
  removal), `journal_file`, `op`.

`live_messages(spark, path)` joins the two: what the journal still holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

import relaymq_spark.options as opt
from relaymq_spark.endpoint import address_of
from relaymq_spark.projection import check_projection, ddl_columns, project_rows
from relaymq_spark.rows import (
    arrow_schema,
    columns_batch,
    property_columns,
    record_batch,
    schema_for,
)
from relaymq_spark.worker_gc import settle

JOURNAL_COLUMNS = ", journal_file int, journal_offset long, op string"
#: rows per Arrow record batch handed to Spark
ROWS_PER_BATCH = 2000
REMOVALS_SCHEMA = ("destination string, sequence long, upto long, journal_file int, "
                   "journal_offset long, op string")


class FilePartition(InputPartition):  # type: ignore[misc]
    def __init__(self, file_id: int, path: str) -> None:
        super().__init__((file_id, path))
        self.file_id = file_id
        self.path = path


class JournalDataSource(DataSource):  # type: ignore[misc]
    @classmethod
    def name(cls) -> str:
        return "relaymq-journal"

    def schema(self) -> str:
        return journal_schema(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        return JournalReader(self.options, schema)


def journal_schema(options: Mapping[str, str]) -> str:
    """The source's own schema for its options (`what`, `propertyColumns`)."""
    if options.get("what", "messages") == "removals":
        return REMOVALS_SCHEMA
    return schema_for(property_columns(options.get("propertyColumns"))) + JOURNAL_COLUMNS


class JournalReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opt.check_names(options, opt.JOURNAL_OPTIONS, "relaymq-journal")
        self.schema = schema
        path = options.get("path")
        if not path:
            raise ValueError("relaymq-journal needs the kahaDB directory: .load(path) or "
                             "option 'path'")
        self.directory = Path(path)
        if not self.directory.is_dir():
            raise ValueError(f"relaymq-journal: {path} is not a directory")
        self.what = options.get("what", "messages")
        if self.what not in ("messages", "removals"):
            raise ValueError(f"relaymq-journal: what={self.what!r}: use 'messages' or 'removals'")
        raw = options.get("destination") or ""
        self.keys = {address_of(d.strip()) for d in raw.split(",") if d.strip()} or None
        self.columns = property_columns(options.get("propertyColumns"))
        own = journal_schema(options)
        self.positions = check_projection(schema, own, "relaymq-journal")
        self.width = len(ddl_columns(own))

    def partitions(self) -> Sequence[InputPartition]:
        from relaymq_kahadb.journal.files import list_data_files

        files = list_data_files(self.directory)
        if not files:
            raise ValueError(f"relaymq-journal: no journal files (db-N.log) in {self.directory}")
        return [FilePartition(fid, str(p)) for fid, p in sorted(files.items())]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, FilePartition)
        settle()
        schema = arrow_schema(self.schema)
        if self.what == "messages":
            yield from read_messages(partition.file_id, Path(partition.path), self.keys,
                                     self.columns, schema)
            return
        rows: list[Any] = []
        for row in read_removals(partition.file_id, Path(partition.path), self.keys):
            rows.append(row)
            if len(rows) >= ROWS_PER_BATCH:
                yield record_batch(project_rows(rows, self.positions, self.width), schema)
                rows = []
        if rows:
            yield record_batch(project_rows(rows, self.positions, self.width), schema)


def read_messages(file_id: int, path: Path, keys: set[str] | None,
                  columns: list[tuple[str, str]], schema: Any) -> Iterator[Any]:
    """The message records of one journal file as Arrow record batches: the file
    mapped read-only, decoded column-wise (`journal_decode`), each column built
    in one call, the bodies gathered from the mapping."""
    import mmap

    try:
        with open(path, "rb") as f:
            try:
                buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file cannot be mapped: nothing in it
                return
    except FileNotFoundError:
        return  # removed by the broker's cleaner since planning: nothing left to read
    try:
        batch = _messages_batch(buf, file_id, keys, columns, schema)
    finally:
        try:
            buf.close()  # the batch holds copies: nothing refers to the mapping any more
        except BufferError:  # a failed read's traceback may still: it goes with it
            pass
    if batch is None:
        return
    for start in range(0, batch.num_rows, ROWS_PER_BATCH):
        yield batch.slice(start, ROWS_PER_BATCH)


def _messages_batch(buf: Any, file_id: int, keys: set[str] | None,
                    columns: list[tuple[str, str]], schema: Any) -> Any:
    """One record batch of the file mapped at `buf` (None: no message in it)."""
    from relaymq_spark.journal_decode import decode_messages

    cols = decode_messages(buf, file_id, keys, [n for n, _ in columns])
    if not len(cols):
        return None
    import pyarrow as pa

    n = len(cols)
    return columns_batch(cols, columns, schema, {
        "body": lambda: body_column(cols, buf),
        "journal_file": lambda: pa.array([file_id] * n, pa.int32()),
        "journal_offset": lambda: pa.array(cols.journal_offset, pa.int64()),
        "op": lambda: pa.array(cols.op, pa.string())})


def body_column(cols: Any, data: Any) -> Any:
    """The body column of a journal file's rows (`journal_decode`), gathered from
    the file `data` (its mmap or bytes) by one Arrow `take`, with no Python object
    per body.

    The rows' bodies are laid out as an Arrow binary array over `data` itself,
    whose offsets are the bodies' bounds: element 2k is body k, element 2k+1 the
    bytes between it and the next body. Taking the even elements copies the
    bodies into a new array. When a fan-out reference points back at an earlier
    body, the distinct bodies are sorted by position first and each row takes
    its own. A body that is not in the file as such is built from its value."""
    import numpy as np
    import pyarrow as pa

    n = len(cols)
    other = cols.body_other
    if any(v is not None for v in other.values()):
        b = cols.body_bounds
        return pa.array([other[i] if i in other else data[b[2 * i]:b[2 * i + 1]]
                         for i in range(n)], pa.binary())
    null = np.zeros(n, dtype=bool)
    if other:
        null[list(other)] = True
        if null.all():
            return pa.nulls(n, pa.binary())
    bounds = np.asarray(cols.body_bounds, dtype=np.int64)
    if cols.body_sorted:
        offsets = bounds
        rows = np.arange(0, 2 * n, 2, dtype=np.int64)
    else:
        real = ~null
        pairs = bounds.reshape(n, 2)[real]
        starts, first, inverse = np.unique(pairs[:, 0], return_index=True, return_inverse=True)
        offsets = np.column_stack((starts, pairs[first, 1])).reshape(-1)
        rows = np.zeros(n, dtype=np.int64)
        rows[real] = 2 * inverse
    small = int(offsets[-1]) < 2**31
    kind = pa.binary() if small else pa.large_binary()
    spans = pa.Array.from_buffers(kind, len(offsets) - 1, [
        None, pa.py_buffer(offsets.astype(np.int32) if small else offsets), pa.py_buffer(data)])
    taken = spans.take(pa.array(rows, mask=null if other else None))
    return taken if small else taken.cast(pa.binary())


def read_removals(file_id: int, path: Path, keys: set[str] | None
                  ) -> Iterator[tuple[Any, ...]]:
    """The removal records of one journal file as rows of `REMOVALS_SCHEMA`."""
    from relaymq_kahadb.journal.records import (
        OP_ACK_FWD,
        OP_NAMES,
        OP_PURGE,
        OP_REMOVE,
        OP_REMOVE_DEST,
        OP_REMOVE_RUN,
        OP_REMOVE_SUB,
        RT_BATCH,
        CorruptRecord,
        parse_batch,
        scan,
    )

    try:
        buf = path.read_bytes()  # read-only, no lock; a snapshot of what is there now
    except FileNotFoundError:
        return  # removed by the broker's cleaner since planning: nothing left to read
    interned: dict[bytes, str] = {}
    for offset, rtype, payload in scan(buf, file_id):
        if rtype != RT_BATCH:
            continue
        try:
            ops = parse_batch(payload, interned)
        except CorruptRecord:
            continue
        for op in ops:
            code, key = op[0], op[1]
            if keys is not None and key not in keys:
                continue
            name = OP_NAMES.get(code, str(code))
            if code in (OP_REMOVE, OP_ACK_FWD):
                yield (key, op[2], None, file_id, offset, name)
            elif code == OP_REMOVE_RUN:  # the same as one remove per sequence
                for seq in op[2]:
                    yield (key, seq, None, file_id, offset, name)
            elif code in (OP_PURGE, OP_REMOVE_DEST, OP_REMOVE_SUB):
                yield (key, None, op[2], file_id, offset, name)


def live_messages(spark: Any, path: str, **options: str) -> Any:
    """The messages the journal at `path` still holds (message records without a
    later removal): `messages` anti-joined with `removals`."""
    from pyspark.sql import functions as F

    reader = spark.read.format("relaymq-journal").options(**options)
    msgs = reader.option("what", "messages").load(path)
    rem = spark.read.format("relaymq-journal").options(**options).option("what", "removals") \
        .load(path)
    single = rem.where(F.col("sequence").isNotNull()).select("destination", "sequence").distinct()
    drops = rem.where(F.col("upto").isNotNull()).groupBy("destination") \
        .agg(F.max("upto").alias("dropped_upto"))
    live = msgs.join(single, ["destination", "sequence"], "left_anti") \
        .join(drops, "destination", "left") \
        .where(F.col("dropped_upto").isNull() | (F.col("sequence") > F.col("dropped_upto"))) \
        .drop("dropped_upto")
    return live
