"""`format("relaymq-jdbc")`: a JDBC store's message table (`ACTIVEMQ_MSGS`) as a
batch source, in range partitions on its increasing `ID`.

Options: `url` (a SQLAlchemy URL as the store's: ``sqlite:///path``,
``postgresql+psycopg://user:pw@host/db``), `tablePrefix` (default none, as the
store's), `destination` (optional: only these keys, comma-separated),
`partitions` (default 4), `propertyColumns`. Rows have the columns of the live
source plus `id` (the table's `ID`). The driver asks for the range of `ID`;
each executor reads its slice with its own connection (read-only queries; the
store's lease lock is not touched)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

import relaymq_spark.options as opt
from relaymq_spark.endpoint import address_of
from relaymq_spark.projection import check_projection, ddl_columns, project_rows
from relaymq_spark.rows import arrow_schema, kernel_row, property_columns, record_batch, schema_for
from relaymq_spark.worker_gc import settle

PAGE = 5000


class IdRange(InputPartition):  # type: ignore[misc]
    def __init__(self, low: int, high: int) -> None:
        super().__init__((low, high))
        self.low = low  # exclusive
        self.high = high  # inclusive


class JdbcDataSource(DataSource):  # type: ignore[misc]
    @classmethod
    def name(cls) -> str:
        return "relaymq-jdbc"

    def schema(self) -> str:
        return jdbc_schema(self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        return JdbcReader(self.options, schema)


def _table(prefix: str) -> str:
    """The store's messages table prefix, checked (the table is relaymq-jdbc's
    own definition, `make_schema`, so each database quotes its names as the
    broker created them: upper case, which PostgreSQL keeps only when quoted)."""
    if not prefix.replace("_", "").isalnum() and prefix:
        raise ValueError(f"tablePrefix {prefix!r}: letters, digits and _ only")
    return prefix


def _msgs(prefix: str) -> Any:
    from relaymq_jdbc.schema import make_schema

    return make_schema(prefix).msgs


def jdbc_schema(options: Mapping[str, str]) -> str:
    """The source's own schema for its options (`propertyColumns`)."""
    return schema_for(property_columns(options.get("propertyColumns"))) + ", id long"


def _engine(url: str) -> Any:
    """An engine for the store's URL (relaymq-jdbc's `read_only_engine`). A SQLite file
    is opened read-only (the reader never writes, and a wrong path is an error, not a
    new empty database)."""
    from relaymq_jdbc.engines import read_only_engine
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    try:
        return read_only_engine(parsed)
    except FileNotFoundError:
        raise ValueError(f"relaymq-jdbc: no SQLite database at {parsed.database} "
                         f"(option 'url' {url!r})") from None


class JdbcReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opt.check_names(options, opt.JDBC_OPTIONS, "relaymq-jdbc")
        self.schema = schema
        self.url = options.get("url") or ""
        if not self.url:
            raise ValueError("relaymq-jdbc needs option 'url' (sqlite:///path or "
                             "postgresql+psycopg://user:pw@host/db)")
        self.table = _table(options.get("tablePrefix", ""))  # the prefix of the store tables
        raw = options.get("destination") or ""
        self.keys = sorted({address_of(d.strip()) for d in raw.split(",") if d.strip()})
        self.columns = property_columns(options.get("propertyColumns"))
        self.partitions_wanted = int(options.get("partitions", "4"))
        own = jdbc_schema(options)
        self.positions = check_projection(schema, own, "relaymq-jdbc")
        self.width = len(ddl_columns(own))

    def partitions(self) -> Sequence[InputPartition]:
        from sqlalchemy import func, select

        msgs = _msgs(self.table)
        engine = _engine(self.url)
        try:
            with engine.connect() as c:
                low, high = c.execute(select(func.min(msgs.c.ID), func.max(msgs.c.ID))).one()
        finally:
            engine.dispose()
        if low is None:
            return [IdRange(0, 0)]
        low, high = int(low) - 1, int(high)
        n = max(1, min(self.partitions_wanted, high - low))
        step = -(-(high - low) // n)
        return [IdRange(a, min(high, a + step)) for a in range(low, high, step)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, IdRange)
        settle()
        schema = arrow_schema(self.schema)
        for page in read_ids(self.url, self.table, self.keys, partition.low, partition.high,
                             self.columns):
            yield record_batch(project_rows(page, self.positions, self.width), schema)


def read_ids(url: str, table: str, keys: list[str], low: int, high: int,
             columns: list[tuple[str, str]]) -> Iterator[list[list[Any]]]:
    """The rows of `low < ID <= high`, a page (at most `PAGE` rows) at a time."""
    import relaymq_amqp.hooks  # noqa: F401 - AMQP-encoded messages' properties and bodies
    from relaymq.model.codec import decode_message
    from sqlalchemy import bindparam, select

    if high <= low:
        return
    msgs = _msgs(table)
    query = select(msgs.c.ID, msgs.c.CONTAINER, msgs.c.SEQ, msgs.c.MSG) \
        .where(msgs.c.ID > bindparam("lo"), msgs.c.ID <= bindparam("hi"))
    params: dict[str, Any] = {"hi": high}
    if keys:
        query = query.where(msgs.c.CONTAINER.in_(bindparam("keys", expanding=True)))
        params["keys"] = keys
    query = query.order_by(msgs.c.ID).limit(PAGE)
    engine = _engine(url)
    try:
        pos = low
        while pos < high:
            with engine.connect() as c:
                rows = c.execute(query, {**params, "lo": pos}).all()
            if not rows:
                break
            page = []
            for rid, container, seq, msg in rows:
                m = decode_message(bytes(msg))
                page.append(kernel_row(str(container), int(seq), m, columns) + [int(rid)])
            yield page
            pos = int(rows[-1][0])
    finally:
        engine.dispose()
