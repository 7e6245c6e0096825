"""The rows of a reader as columns: plain Python lists per column, appended to
message by message, turned into Arrow arrays in one call per column
(`rows.columns_batch`). Building rows (a tuple, a dict per map) and handing
pyarrow lists of rows cost more than reading the messages did.

`add_encoded(c, dest, seq, stamp, data)` appends one message the broker sent
as its stored AMQP bytes (live reads); `journal_decode` appends journal
records. The columns are those of `rows.BASE_SCHEMA` plus the requested
property columns (raw values; `rows.columns_batch` converts them).

Compiled with mypyc (`[tool.relaymq.compile]` of relaymq-spark): keep it free of
pyspark and pyarrow.
"""

from __future__ import annotations

from typing import Any, Final

from relaymq_amqp.scanner import DecodeError, body_value, decode_map_at, scan


class Columns:
    """Column lists of the rows read so far (maps as flat key/value lists with
    offsets, Arrow's own layout)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.body: list[bytes | None] = []
        self.message_id: list[str | None] = []
        self.destination: list[str] = []
        self.sequence: list[int] = []
        self.timestamp: list[int | None] = []  # epoch ms
        self.expiration: list[int | None] = []
        self.priority: list[int] = []
        self.redelivered: list[bool] = []
        self.correlation_id: list[str | None] = []
        self.type: list[str | None] = []
        self.group_id: list[str | None] = []
        self.h_offsets: list[int] = [0]
        self.h_keys: list[str] = []
        self.h_values: list[str] = []
        self.p_offsets: list[int] = [0]
        self.p_keys: list[str] = []
        self.p_values: list[str | None] = []
        self.body_type: list[str] = []
        #: raw values of the requested property columns, one list per name
        self.extra: list[list[Any]] = [[] for _ in names]
        #: journal reads: the record's offset and op of each row
        self.journal_offset: list[int] = []
        self.op: list[str] = []
        #: journal reads keep no body objects: each row's body is its start and end in
        #: the file's bytes, two entries per row (`journal.body_column` gathers them);
        #: a row whose body is not in the file as such (rare encodings: None, or bytes
        #: made from the record) has the previous row's end twice and its value here
        self.body_bounds: list[int] = []
        self.body_other: dict[int, bytes | None] = {}
        self.body_last = 0
        #: the bounds only grow (no fan-out reference points back at an earlier body)
        self.body_sorted = True

    def __len__(self) -> int:
        return len(self.sequence)


def text(v: Any) -> str | None:
    """A header or property value as the map columns show it: booleans as
    `true`/`false` (as JMS and the broker write them), bytes as UTF-8."""
    if v is None:
        return None
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def add_properties(c: Columns, props: dict[Any, Any], body_type: str) -> None:
    """The properties map, the body type and the property columns of one row."""
    c.body_type.append(body_type)
    if props:
        pk = c.p_keys
        pv = c.p_values
        for k, v in props.items():
            pk.append(str(k))
            pv.append(text(v))
    c.p_offsets.append(len(c.p_keys))
    names = c.names
    for i in range(len(names)):
        c.extra[i].append(props.get(names[i]) if props else None)


#: relaymq_amqp.scanner.body_value's kinds as the kernel's body types
_BODY_TYPES: Final = {"data": "bytes", "binary": "bytes", "string": "text", "null": "empty",
               "value": "amqp-value", "sequence": "amqp-sequence"}
_HEADER_FIELDS: Final = (("content_type", 6), ("reply_to", 4), ("user_id", 1), ("to", 2))


def add_encoded(c: Columns, dest: str, seq: int, stamp: int, data: bytes) -> None:
    """Append one stored AMQP message; `stamp`: the broker's timestamp (ms),
    the creation time of a message that has none."""
    s = scan(data)
    h: list[Any] = s.header or []
    nh = len(h)
    p: list[Any] = s.properties or []
    np_ = len(p)
    hk = c.h_keys
    hv = c.h_values
    if nh > 0 and h[0]:
        hk.append("durable")
        hv.append("true")
    ttl = h[2] if nh > 2 else None
    if ttl:
        hk.append("ttl")
        hv.append(str(int(ttl)))
    for name, i in _HEADER_FIELDS:
        v = p[i] if np_ > i else None
        if v:
            hk.append(name)
            hv.append(text(v) or "")
    if s.message_annotations is not None:
        for k, v in decode_map_at(data, s.message_annotations).items():
            hk.append(str(k))
            hv.append(text(v) or "")
    c.h_offsets.append(len(hk))
    props = decode_map_at(data, s.application_properties) \
        if s.application_properties is not None else {}
    kind, raw = body_value(data, s)
    body: bytes | None
    if kind == "data" or kind == "binary" or kind == "string":
        body = raw
    elif kind == "null":
        body = None
    else:
        body = other_body(data)
    c.body.append(body)
    priority = h[1] if nh > 1 and h[1] is not None else 4
    created = p[9] if np_ > 9 else None
    c.message_id.append(text(p[0]) if np_ else None)
    c.destination.append(dest)
    c.sequence.append(seq)
    c.timestamp.append(int(created) if created else (stamp if stamp else None))
    expires = p[8] if np_ > 8 else None
    c.expiration.append(int(expires) if expires else None)
    c.priority.append(int(priority))
    c.redelivered.append(bool(h[4]) if nh > 4 and h[4] else False)
    c.correlation_id.append(text(p[5]) if np_ > 5 else None)
    c.type.append(text(p[3]) if np_ > 3 else None)
    c.group_id.append(text(p[10]) if np_ > 10 else None)
    add_properties(c, props, _BODY_TYPES.get(kind, "bytes"))


def other_body(data: bytes) -> bytes | None:
    """An amqp-value of another type or amqp-sequence sections: as proton shows it."""
    from proton import Message

    m = Message()
    m.decode(data)
    body = m.body
    if body is None:
        return None
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    return str(body).encode()


def add_encoded_many(c: Columns, dest: str, records: list[tuple[int, int, Any]]) -> None:
    """`add_encoded` for each `(seq, stamp, data)` (data: bytes, or a bytearray)."""
    for seq, stamp, data in records:
        try:
            add_encoded(c, dest, seq, stamp, data if type(data) is bytes else bytes(data))
        except DecodeError as exc:
            raise ValueError(f"{dest}: message {seq} is not a valid AMQP message: {exc}") \
                from None
