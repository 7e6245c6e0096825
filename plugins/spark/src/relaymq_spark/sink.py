"""`df.write.format("relaymq")` and `writeStream.format("relaymq")`.

Each row becomes one persistent message, settled by the broker only once stored,
with ``_AMQ_DUPL_ID = "spark:<query>:<batch>:<partition>:<row>"``: a batch Spark
runs again (task retry, driver restart on the same checkpoint) sends the same
ids, and the broker drops the copies (docs/duplicate-detection.md).

Option ``maxRate``: at most that many messages per second per task.

Spark hands the writers Arrow record batches (`DataSourceArrowWriter`); each
row is encoded straight to AMQP bytes (relaymq-amqp's encoder: a header with
durable and priority, the properties, the application properties, the body as
an amqp-value string or binary, as python-qpid-proton writes them) and sent
with up to `sendWindow` unsettled.
Row columns: ``body`` (string or binary, required), ``destination`` (else the
option), ``properties`` (map), ``priority``, ``message_id``, ``correlation_id``,
``type``, ``group_id``, ``body_type`` (``text``/``bytes``: see `as_body`); the
readers' `READ_ONLY` columns are not sent; any other column becomes an
application property.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

import relaymq_spark.options as opt
from relaymq_spark.sender import send_encoded
from relaymq_spark.worker_gc import settle

#: columns a reader gives that describe where and when a message was stored, not
#: what it says: a row read and written back (a copy of a queue) does not send
#: them as application properties (`body_string` is the body again, `headers` the
#: header fields the broker sets itself, the journal's and JDBC store's places)
READ_ONLY = {"sequence", "timestamp", "expiration", "redelivered", "body_string", "headers",
             "journal_file", "journal_offset", "op"}
KNOWN = {"body", "destination", "properties", "priority", "message_id", "correlation_id",
         "type", "group_id", "body_type"} | READ_ONLY
QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"


@dataclass
class Sent(WriterCommitMessage):  # type: ignore[misc]
    partition: int
    count: int


def _scalar(v: Any) -> Any:
    """A property value as AMQP encodes it: integers as long (as proton writes a
    Python int), text, double, boolean, binary; anything else as text."""
    from relaymq_amqp.types import Long

    if v is None or isinstance(v, (str, float, bool, bytes)):
        return v
    if isinstance(v, int):
        return Long(v)
    return str(v)


def encode_message(body: Any, dest: str, props: dict[str, Any], priority: Any = None,
                   message_id: Any = None, correlation_id: Any = None, type_: Any = None,
                   group_id: Any = None) -> bytes:
    """One persistent AMQP message as bytes."""
    from relaymq_amqp import encode as enc
    from relaymq_amqp.scanner import PROPERTIES

    if isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    parts = [enc.header_section(True, None if priority is None else int(priority)),
             enc.list_section(PROPERTIES, [
                 None if message_id is None else str(message_id), None, dest,
                 None if type_ is None else str(type_), None,
                 None if correlation_id is None else str(correlation_id), None, None, None,
                 None, None if group_id is None else str(group_id)])]
    if props:
        parts.append(enc.section(0x74, props))
    parts.append(enc.section(0x77, body))
    return b"".join(parts)


_DUPL_KEY = b"\xa1\x0c_AMQ_DUPL_ID"


def _str_or_binary(value: str | bytes) -> bytes:
    """An AMQP string (str) or binary (bytes) value, short form when it fits."""
    if isinstance(value, str):
        raw = value.encode()
        small, wide = 0xA1, 0xB1
    else:
        raw = value
        small, wide = 0xA0, 0xB0
    n = len(raw)
    if n < 256:
        return bytes((small, n)) + raw
    return bytes((wide,)) + n.to_bytes(4, "big") + raw


def plain_message(head: bytes, dup_id: str, body: str | bytes) -> bytes:
    """A message that is only a body: `head` (header and properties sections,
    made once per destination by `encode_message`), application properties
    holding just ``_AMQ_DUPL_ID``, the body as an amqp-value string or binary:
    the bytes `encode_message` makes for such a row, without its per-row work."""
    ident = dup_id.encode()
    pairs = _DUPL_KEY + bytes((0xA1, len(ident))) + ident  # ids are short (< 256 bytes)
    return b"".join((head, b"\x00\x53\x74\xc1", bytes((len(pairs) + 1, 2)), pairs,
                     b"\x00\x53\x77", _str_or_binary(body)))


def as_body(body: Any, body_type: str | None) -> Any:
    """The row's body as sent: binary bytes with ``body_type`` ``text`` (what the
    readers give for a text message) go as an AMQP string (a JMS TextMessage),
    a string with ``bytes`` as binary (a BytesMessage); otherwise as the column
    holds it (string: text, binary: bytes)."""
    if body_type == "text" and isinstance(body, (bytes, bytearray)):
        try:
            return bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            return body  # not text after all: sent as it is
    if body_type == "bytes" and isinstance(body, str):
        return body.encode()
    return body


def to_messages(batches: Iterator[Any], default_dest: str | None, id_prefix: str,
                names: list[str]) -> Iterator[bytes]:
    """The encoded messages for the rows of Arrow record batches, in order; row `i`
    gets ``_AMQ_DUPL_ID = <id_prefix>:<i>``."""
    if "body" not in names:
        raise ValueError("the RelayMQ sink needs a column 'body' (string or binary)")
    if default_dest is None and "destination" not in names:
        raise ValueError("the RelayMQ sink needs option 'destination' or a 'destination' column")
    extra = [k for k in names if k not in KNOWN]
    heads: dict[str, bytes] = {}  # destination -> header and properties sections
    addresses: dict[str, str] = {}  # a row's destination -> its checked address
    i = 0
    for batch in batches:
        n = batch.num_rows
        cols = {k: batch.column(k).to_pylist() for k in batch.schema.names}
        none = [None] * n
        bodies = cols["body"]
        dests = cols.get("destination", none)
        maps = cols.get("properties", none)
        prio, mid, corr = (cols.get(k, none) for k in ("priority", "message_id",
                                                        "correlation_id"))
        types, groups = cols.get("type", none), cols.get("group_id", none)
        body_types = cols.get("body_type", none)
        others = [(k, cols[k]) for k in extra]
        for j in range(n):
            dest = dests[j] or default_dest
            if not dest:
                raise ValueError(f"row {i}: no destination (null 'destination' column and "
                                 "no option)")
            address = addresses.get(dest)
            if address is None:
                try:
                    address = addresses[dest] = opt.sink_destination(str(dest))
                except opt.OptionError as exc:
                    raise ValueError(f"row {i}: {exc}") from None
            body = as_body(bodies[j], body_types[j])
            if (not others and not maps[j] and prio[j] is None and mid[j] is None
                    and corr[j] is None and types[j] is None and groups[j] is None
                    and isinstance(body, (str, bytes)) and len(id_prefix) < 200):
                head = heads.get(address)
                if head is None:
                    head = heads[address] = _head(address)
                yield plain_message(head, f"{id_prefix}:{i}", body)
                i += 1
                continue
            props: dict[str, Any] = {}
            given = maps[j]
            if given:
                for k, v in (given.items() if isinstance(given, dict) else given):
                    props[str(k)] = _scalar(v)
            for k, col in others:
                v = col[j]
                if v is not None:
                    props[k] = _scalar(v)
            props["_AMQ_DUPL_ID"] = f"{id_prefix}:{i}"
            yield encode_message(body, address, props, prio[j], mid[j],
                                 corr[j], types[j], groups[j])
            i += 1


def _head(dest: str) -> bytes:
    """The header and properties sections `encode_message` writes for a plain row."""
    full = encode_message(b"", dest, {})
    return full[:full.rindex(b"\x00\x53\x77")]


class _Writer:
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        opt.check_names(options, opt.WRITE_OPTIONS, "relaymq sink")
        self.endpoint = opt.endpoint(options)
        raw = (options.get("destination") or options.get("destinations") or "").strip()
        if "," in raw:
            raise opt.OptionError(f"destination {raw!r}: the sink sends to one destination; "
                                  "give each row its own in a 'destination' column")
        self.dest = opt.sink_destination(raw) if raw else None
        self.names = list(schema.fieldNames())
        if "body" in self.names:
            kind = schema["body"].dataType
            if not isinstance(kind, (StringType, BinaryType)):
                raise opt.OptionError(
                    f"the RelayMQ sink's column 'body' must be string or binary, not "
                    f"{kind.simpleString()}: cast it (e.g. .selectExpr(\"cast(body as string) "
                    "as body\", ...)) or serialise it (to_json)")
        self.window = opt.positive_int(options, "sendWindow", 1000) or 1000
        self.write_id = options.get("writeId") or uuid.uuid4().hex
        raw_rate = options.get("maxRate")
        self.rate = float(raw_rate) if raw_rate else None

    def _send(self, rows: Iterator[Any], prefix: str) -> Sent:
        settle()
        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        n = send_encoded(self.endpoint, to_messages(rows, self.dest, f"{prefix}:{part}", self.names),
                         self.window, self.rate)
        return Sent(part, n)


class BatchWriter(_Writer, DataSourceArrowWriter):  # type: ignore[misc]
    """Ids: ``spark:<writeId>:0:<partition>:<row>`` (writeId: the option, else one per write)."""

    def write(self, iterator: Iterator[Any]) -> Sent:
        return self._send(iterator, f"spark:{self.write_id}:0")


class StreamWriter(_Writer, DataSourceStreamArrowWriter):  # type: ignore[misc]
    """Ids: ``spark:<query id>:<batch id>:<partition>:<row>``; the query id is the
    one kept in the checkpoint, so a restarted query sends the same ids."""

    def write(self, iterator: Iterator[Any]) -> Sent:
        ctx = TaskContext.get()
        query = batch = None
        if ctx is not None:
            query = ctx.getLocalProperty(QUERY_ID)
            batch = ctx.getLocalProperty(BATCH_ID)
        if query is None or batch is None:
            raise RuntimeError("the RelayMQ stream sink needs Spark's query and batch ids "
                               f"(task local properties {QUERY_ID}, {BATCH_ID})")
        return self._send(iterator, f"spark:{query}:{batch}")

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass
