"""`df.write.format("relaymq")` and `writeStream.format("relaymq")`.

Each row becomes one persistent message, settled by the broker only once stored,
with ``_AMQ_DUPL_ID = "spark:<query>:<batch>:<partition>:<row>"``: a batch Spark
runs again (task retry, driver restart on the same checkpoint) sends the same
ids, and the broker drops the copies (docs/duplicate-detection.md).

Option ``maxRate``: at most that many messages per second per task.
Row columns: ``body`` (string or binary, required), ``destination`` (else the
option), ``properties`` (map), ``priority``, ``message_id``, ``correlation_id``,
``type``, ``group_id``; any other column becomes an application property.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from proton import Message
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

import relaymq_spark.options as opt
from relaymq_spark.client import Client, address_of

KNOWN = {"body", "destination", "properties", "priority", "message_id", "correlation_id",
         "type", "group_id"}
QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"


@dataclass
class Sent(WriterCommitMessage):  # type: ignore[misc]
    partition: int
    count: int


def _scalar(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool, bytes)):
        return v
    return str(v)


def to_messages(rows: Iterator[Any], default_dest: str | None, id_prefix: str,
                names: list[str], rate: float | None = None) -> Iterator[Message]:
    if "body" not in names:
        raise ValueError("the RelayMQ sink needs a column 'body' (string or binary)")
    if default_dest is None and "destination" not in names:
        raise ValueError("the RelayMQ sink needs option 'destination' or a 'destination' column")
    started = time.monotonic()
    for i, row in enumerate(rows):
        if rate:  # at most `rate` messages per second from this task
            ahead = started + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        d = row.asDict() if hasattr(row, "asDict") else dict(zip(names, row, strict=False))
        dest = d.get("destination") or default_dest
        if not dest:
            raise ValueError(f"row {i}: no destination (null 'destination' column and no option)")
        body = d.get("body")
        if isinstance(body, (bytearray, memoryview)):
            body = bytes(body)
        props: dict[str, Any] = {}
        for k, v in (d.get("properties") or {}).items():
            props[str(k)] = _scalar(v)
        for k in names:
            if k not in KNOWN and d.get(k) is not None:
                props[k] = _scalar(d[k])
        props["_AMQ_DUPL_ID"] = f"{id_prefix}:{i}"
        msg = Message(body=body, address=address_of(str(dest)), properties=props, durable=True)
        if d.get("priority") is not None:
            msg.priority = int(d["priority"])
        if d.get("message_id") is not None:
            msg.id = str(d["message_id"])
        if d.get("correlation_id") is not None:
            msg.correlation_id = str(d["correlation_id"])
        if d.get("type") is not None:
            msg.subject = str(d["type"])
        if d.get("group_id") is not None:
            msg.group_id = str(d["group_id"])
        yield msg


class _Writer:
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.endpoint = opt.endpoint(options)
        dests = opt.destinations(options, required=False)
        self.dest = dests[0] if dests else None
        self.names = list(schema.fieldNames())
        self.window = opt.positive_int(options, "sendWindow", 1000) or 1000
        self.write_id = options.get("writeId") or uuid.uuid4().hex
        raw_rate = options.get("maxRate")
        self.rate = float(raw_rate) if raw_rate else None

    def _send(self, rows: Iterator[Any], prefix: str) -> Sent:
        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        n = Client(self.endpoint).send(
            to_messages(rows, self.dest, f"{prefix}:{part}", self.names, self.rate), self.window)
        return Sent(part, n)


class BatchWriter(_Writer, DataSourceWriter):  # type: ignore[misc]
    """Ids: ``spark:<writeId>:0:<partition>:<row>`` (writeId: the option, else one per write)."""

    def write(self, iterator: Iterator[Any]) -> Sent:
        return self._send(iterator, f"spark:{self.write_id}:0")


class StreamWriter(_Writer, DataSourceStreamWriter):  # type: ignore[misc]
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
