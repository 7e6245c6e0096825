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
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
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
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def body_bytes(body: Any) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    return str(body).encode()


def message_row(dest: str, seq: int, m: Any, columns: list[tuple[str, str]]) -> tuple[Any, ...]:
    """One row from a `proton.Message`."""
    body = body_bytes(m.body)
    props = m.properties or {}
    headers: dict[str, str] = {}
    if m.durable:
        headers["durable"] = "true"
    if m.ttl:
        headers["ttl"] = str(int(m.ttl * 1000))
    for name in ("content_type", "reply_to", "user_id", "to"):
        v = getattr(m, "address" if name == "to" else name, None)
        if v:
            headers[name] = _text(v) or ""
    if m.annotations:
        for k, v in m.annotations.items():
            headers[str(k)] = _text(v) or ""
    row = [
        body, None if body is None else body.decode("utf-8", "replace"),
        _text(m.id), dest, seq, _ts(m.creation_time), _ts(m.expiry_time), int(m.priority),
        bool(m.delivery_count), _text(m.correlation_id), _text(m.subject),
        _text(m.group_id), headers,
        {str(k): _text(v) for k, v in props.items()},
    ]
    for name, kind in columns:
        v = props.get(name)
        try:
            row.append(None if v is None else _TYPES[kind](v))
        except (TypeError, ValueError):
            row.append(None)
    return tuple(row)


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
