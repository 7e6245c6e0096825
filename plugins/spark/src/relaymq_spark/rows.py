"""The rows the source produces: schema and conversion of AMQP messages.

Columns (every reader: live, journal, JDBC):

| column | type | from |
|---|---|---|
| body | binary | the body's bytes (AMQP data/value; text as UTF-8) |
| body_string | string | the body as text (binary decoded as UTF-8, invalid bytes replaced) |
| message_id | string | message-id |
| destination | string | the key read (`queue://X`, `durable://C:N`) |
| sequence | long | the message's sequence number on that destination |
| timestamp | timestamp | creation-time (JMSTimestamp) |
| expiration | timestamp | absolute-expiry-time (null: never) |
| priority | int | header priority |
| redelivered | boolean | header delivery-count > 0 |
| correlation_id, type, group_id | string | properties / subject |
| headers | map<string,string> | the other header and properties fields that are set |
| properties | map<string,string> | application properties, as text |
| body_type | string | what the body is (the kernel's body types): `text` (an AMQP string, a JMS TextMessage), `bytes` (data or binary: BytesMessage), `empty`, `amqp-value` (another value, shown as text), `amqp-sequence`, or `map`, `stream`, `object` from other protocols |

plus one typed column per entry of the option ``propertyColumns``
(``"region:string,amount:double"``), null when a message lacks the property.

Readers hand Spark Arrow record batches, not tuples: pyspark converts tuples
value by value in Python, which cost more than reading. Live and journal reads
append each message to per-column lists (`columns.Columns`, compiled) and build
each Arrow column in one call (`columns_batch`); the JDBC reader still builds
rows (`kernel_row`, `record_batch`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from relaymq.model.message import client_annotations

from relaymq_spark.columns import text

BASE_SCHEMA = (
    "body binary, body_string string, message_id string, destination string, sequence long, "
    "timestamp timestamp, expiration timestamp, priority int, redelivered boolean, "
    "correlation_id string, type string, group_id string, "
    "headers map<string,string>, properties map<string,string>, body_type string"
)

_TYPES: dict[str, Callable[[Any], Any]] = {
    "string": str, "long": int, "int": int, "integer": int, "bigint": int,
    "double": float, "float": float, "boolean": lambda v: v if isinstance(v, bool)
    else str(v).lower() == "true",
}
_SQL = {"integer": "int", "bigint": "long", "float": "double"}


def property_columns(spec: str | None) -> list[tuple[str, str]]:
    """``"a:string,b:double"`` -> [("a", "string"), ("b", "double")] (checked)."""
    out: list[tuple[str, str]] = []
    for part in (spec or "").split(","):
        part = part.strip()
        if not part:
            continue
        name, _, kind = part.partition(":")
        kind = (kind or "string").strip().lower()
        if kind not in _TYPES:
            raise ValueError(f"propertyColumns: {part!r}: the type must be one of "
                             f"{', '.join(sorted(_TYPES))}")
        out.append((name.strip(), kind))
    return out


def schema_for(columns: list[tuple[str, str]]) -> str:
    extra = "".join(f", `{n}` {_SQL.get(k, k)}" for n, k in columns)
    return BASE_SCHEMA + extra


def _ts(seconds: float | None) -> _dt.datetime | None:
    if not seconds:
        return None
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC).replace(tzinfo=None)


def _ms(ms: int | None) -> _dt.datetime | None:
    return _ts(ms / 1000.0) if ms else None


def kernel_row(dest: str, seq: int, m: Any, columns: list[tuple[str, str]]) -> list[Any]:
    """One row (as a list, for readers that append columns) from a kernel `Message`
    read back from a store (kahaDB journal, JDBC table)."""
    body = m.body
    if isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    props = m.properties or {}
    headers: dict[str, str] = {}
    if m.durable:
        headers["durable"] = "true"
    for name in ("content_type", "reply_to", "user_id"):
        v = getattr(m, name, None)
        if v:
            headers[name] = text(v) or ""
    for k, v in client_annotations(m.annotations).items():
        headers[str(k)] = text(v) or ""
    row: list[Any] = [
        body, None if body is None else body.decode("utf-8", "replace"),
        text(m.message_id), dest, seq, _ms(m.timestamp), _ms(m.expiration), int(m.priority),
        False, text(m.correlation_id), text(m.type), text(m.group_id), headers,
        {str(k): text(v) for k, v in props.items()}, str(m.body_type or "bytes"),
    ]
    for name, kind in columns:
        v = props.get(name)
        try:
            row.append(None if v is None else _TYPES[kind](v))
        except (TypeError, ValueError):
            row.append(None)
    return row


def arrow_schema(schema: Any) -> Any:
    """The Arrow schema pyspark expects from `read()` for a reader's StructType."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def record_batch(rows: Sequence[Sequence[Any]], schema: Any) -> Any:
    """Rows (lists or tuples in schema order) as one `pyarrow.RecordBatch`."""
    import pyarrow as pa

    columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema)


def columns_batch(cols: Any, columns: list[tuple[str, str]], schema: Any,
                  more: Mapping[str, Callable[[], Any]] | None = None) -> Any:
    """One `pyarrow.RecordBatch` from a `columns.Columns`, with the columns of the
    Arrow `schema` in its order (`more`: how to build the reader's own columns by
    name, or a column it keeps elsewhere, such as the journal's bodies); only the
    columns the schema names are built, each once, in one pyarrow call."""
    import pyarrow as pa
    import pyarrow.compute as pc

    types = {f.name: f.type for f in schema}
    made: dict[str, Any] = {}

    def column(name: str) -> Any:
        arr = made.get(name)
        if arr is None:
            arr = made[name] = builders[name]()
        return arr

    def body() -> Any:
        return column("body")

    def body_string() -> Any:
        try:
            return body().cast(pa.string())  # checks the UTF-8, shares the buffers
        except pa.ArrowInvalid:
            return pa.array([None if b is None else b.decode("utf-8", "replace")
                             for b in body().to_pylist()], pa.string())

    def stamps(ms: list[int | None], name: str) -> Any:
        return pc.multiply(pa.array(ms, pa.int64()), 1000).cast(types[name])

    def mapping(offsets: list[int], keys: list[str], values: list[Any], name: str) -> Any:
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, pa.string()),
                                       pa.array(values, pa.string()), type=types[name])

    def text(values: list[Any]) -> Callable[[], Any]:
        return lambda: pa.array(values, pa.string())

    builders: dict[str, Callable[[], Any]] = {
        "body": lambda: pa.array(cols.body, pa.binary()), "body_string": body_string, "message_id": text(cols.message_id),
        "destination": text(cols.destination),
        "sequence": lambda: pa.array(cols.sequence, pa.int64()),
        "timestamp": lambda: stamps(cols.timestamp, "timestamp"),
        "expiration": lambda: stamps(cols.expiration, "expiration"),
        "priority": lambda: pa.array(cols.priority, pa.int32()),
        "redelivered": lambda: pa.array(cols.redelivered, pa.bool_()),
        "correlation_id": text(cols.correlation_id), "type": text(cols.type),
        "group_id": text(cols.group_id),
        "headers": lambda: mapping(cols.h_offsets, cols.h_keys, cols.h_values, "headers"),
        "properties": lambda: mapping(cols.p_offsets, cols.p_keys, cols.p_values, "properties"),
        "body_type": text(cols.body_type),
    }
    for (name, kind), raw in zip(columns, cols.extra, strict=True):
        builders[name] = _typed(raw, _TYPES[kind], name, types)
    if more:
        builders.update(more)
    return pa.RecordBatch.from_arrays([column(f.name) for f in schema], schema=schema)


def _typed(raw: list[Any], convert: Callable[[Any], Any], name: str,
           types: dict[str, Any]) -> Callable[[], Any]:
    """How to build a property column: each raw value converted (null when it is
    missing or does not convert)."""
    def build() -> Any:
        import pyarrow as pa

        values: list[Any] = []
        for v in raw:
            try:
                values.append(None if v is None else convert(v))
            except (TypeError, ValueError):
                values.append(None)
        return pa.array(values, types[name])
    return build
