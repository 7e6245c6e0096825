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

plus one typed column per entry of the option ``propertyColumns``
(``"region:string,amount:double"``), null when a message lacks the property.

Readers hand Spark Arrow record batches (`record_batch`), not tuples: pyspark
converts tuples value by value in Python, which cost more than reading. Live
reads decode the messages' AMQP bytes with relaymq-amqp's scanner
(`encoded_row`), which reads only the sections the columns need.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from typing import Any

BASE_SCHEMA = (
    "body binary, body_string string, message_id string, destination string, sequence long, "
    "timestamp timestamp, expiration timestamp, priority int, redelivered boolean, "
    "correlation_id string, type string, group_id string, "
    "headers map<string,string>, properties map<string,string>"
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


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def body_bytes(body: Any) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    return str(body).encode()


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
            headers[name] = _text(v) or ""
    for k, v in (m.annotations or {}).items():
        headers[str(k)] = _text(v) or ""
    row: list[Any] = [
        body, None if body is None else body.decode("utf-8", "replace"),
        _text(m.message_id), dest, seq, _ms(m.timestamp), _ms(m.expiration), int(m.priority),
        False, _text(m.correlation_id), _text(m.type), _text(m.group_id), headers,
        {str(k): _text(v) for k, v in props.items()},
    ]
    for name, kind in columns:
        v = props.get(name)
        try:
            row.append(None if v is None else _TYPES[kind](v))
        except (TypeError, ValueError):
            row.append(None)
    return row


_EPOCH = _dt.datetime(1970, 1, 1)


def _ms_naive(ms: int | None) -> _dt.datetime | None:
    """Epoch milliseconds as a naive UTC datetime (what `_ts` gives)."""
    return _EPOCH + _dt.timedelta(milliseconds=int(ms)) if ms else None


def encoded_row(dest: str, seq: int, stamp: int, data: bytes,
                columns: list[tuple[str, str]]) -> list[Any]:
    """One row from a message's encoded AMQP bytes (what the broker stored);
    `stamp`: the broker's timestamp (ms), used when the message has no creation
    time."""
    from relaymq_amqp.scanner import body_value, decode_map_at, scan

    if type(data) is not bytes:
        data = bytes(data)
    s = scan(data)
    h = s.header or ()
    nh = len(h)
    p = s.properties or ()
    np_ = len(p)
    headers: dict[str, str] = {}
    if nh > 0 and h[0]:
        headers["durable"] = "true"
    ttl = h[2] if nh > 2 else None
    if ttl:
        headers["ttl"] = str(int(ttl))
    for name, i in (("content_type", 6), ("reply_to", 4), ("user_id", 1), ("to", 2)):
        v = p[i] if np_ > i else None
        if v:
            headers[name] = _text(v) or ""
    if s.message_annotations is not None:
        for k, v in decode_map_at(data, s.message_annotations).items():
            headers[str(k)] = _text(v) or ""
    props = decode_map_at(data, s.application_properties) \
        if s.application_properties is not None else {}
    kind, raw = body_value(data, s)
    body: bytes | None
    if kind == "data" or kind == "binary" or kind == "string":
        body = bytes(raw)
    elif kind == "null":
        body = None
    else:  # an amqp-value of another type or amqp-sequence sections: as proton shows it
        from proton import Message

        m = Message()
        m.decode(data)
        body = body_bytes(m.body)
    priority = h[1] if nh > 1 and h[1] is not None else 4
    created = p[9] if np_ > 9 else None
    row: list[Any] = [
        body, None if body is None else body.decode("utf-8", "replace"),
        _text(p[0] if np_ else None), dest, seq, _ms_naive(created or stamp),
        _ms_naive(p[8] if np_ > 8 else None), int(priority),
        bool(h[4]) if nh > 4 and h[4] else False,
        _text(p[5] if np_ > 5 else None), _text(p[3] if np_ > 3 else None),
        _text(p[10] if np_ > 10 else None), headers,
        {str(k): _text(v) for k, v in props.items()},
    ]
    for name, kind_ in columns:
        v = props.get(name)
        try:
            row.append(None if v is None else _TYPES[kind_](v))
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
