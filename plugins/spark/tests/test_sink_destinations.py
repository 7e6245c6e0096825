"""Where the sink sends (`df.write.format("relaymq")`): a queue or a topic, by the
option or by each row's `destination` column; a durable subscription (what the
source reads a topic through) is refused with the reason, by the option and by
a row, and a row's error names the row. A real broker process receives what is
sent; the rows are Arrow batches as Spark hands them to the writer."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from brokers import BrokerProcess
from proton.reactor import DurableSubscription
from proton.utils import BlockingConnection
from pyspark.sql.types import StringType, StructField, StructType
from relaymq_spark.client import Client, Endpoint
from relaymq_spark.options import OptionError
from relaymq_spark.sender import send_encoded
from relaymq_spark.sink import BatchWriter, to_messages

SCHEMA = StructType([StructField("body", StringType()), StructField("destination", StringType())])


def writer(url: str, destination: str | None = None) -> BatchWriter:
    options = {"url": url} | ({"destination": destination} if destination else {})
    return BatchWriter(options, SCHEMA)


def test_a_topic_by_option_or_by_row_reaches_its_durable_subscriber(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path).start()
    try:
        client = Client(Endpoint(broker.url))
        sub = "durable://SINKCID:SUB"
        conn = BlockingConnection(broker.url, container_id="SINKCID")
        try:  # the subscription exists before the sends (detached, kept)
            conn.create_receiver("topic://SINKT", name="SUB",
                                 options=DurableSubscription()).detach()
        finally:
            conn.close()
        w = writer(broker.url, "topic://SINKT")
        assert w.dest == "topic://SINKT"
        rows = pa.RecordBatch.from_pydict({"body": ["by option", "by row"],
                                           "destination": [None, "topic://SINKT"]})
        sent = send_encoded(Endpoint(broker.url),
                            to_messages(iter([rows]), w.dest, "t:0", ["body", "destination"]))
        assert sent == 2
        assert sorted(m.body for _, m in client.read(sub, 0, 10**9)) == ["by option", "by row"]
    finally:
        broker.stop()


def test_a_durable_subscription_or_several_destinations_are_refused_by_option() -> None:
    with pytest.raises(OptionError, match="a durable subscription is read, not written to"):
        writer("amqp://127.0.0.1:1", "durable://CID:SUB")
    with pytest.raises(OptionError, match="the sink sends to one destination"):
        writer("amqp://127.0.0.1:1", "A,B")


def test_a_row_naming_a_durable_subscription_fails_with_its_row_number() -> None:
    rows = pa.RecordBatch.from_pydict({"body": ["ok", "bad"],
                                       "destination": ["queue://Q", "durable://CID:SUB"]})
    messages = to_messages(iter([rows]), None, "t:0", ["body", "destination"])
    assert next(messages)  # the first row is fine
    with pytest.raises(ValueError, match="row 1: destination durable://CID:SUB: a durable "
                                         "subscription is read, not written to"):
        next(messages)


def test_rows_read_and_written_back_carry_no_reader_columns_as_properties(
        tmp_path: Path) -> None:
    """A copy of a queue (`spark.read...load().write...`): the columns that say
    where and when a message was stored do not become application properties;
    the other columns do, with their types."""
    broker = BrokerProcess(tmp_path).start()
    try:
        rows = pa.RecordBatch.from_pydict({
            "body": [b"copied"], "body_string": ["copied"], "sequence": [7],
            "timestamp": [1_700_000_000_000], "redelivered": [False],
            "headers": pa.array([[("durable", "true")]], pa.map_(pa.string(), pa.string())),
            "properties": pa.array([[("region", "eu")]], pa.map_(pa.string(), pa.string())),
            "amount": [2.5]})
        names = rows.schema.names
        assert send_encoded(Endpoint(broker.url),
                            to_messages(iter([rows]), "queue://COPY", "c:0", names)) == 1
        (_, m), = Client(Endpoint(broker.url)).read("queue://COPY", 0, 10)
        assert m.body == b"copied"
        assert {k: v for k, v in m.properties.items() if k != "_AMQ_DUPL_ID"} == \
            {"region": "eu", "amount": 2.5}
    finally:
        broker.stop()


def test_a_body_that_is_neither_string_nor_binary_is_refused_with_the_reason() -> None:
    from pyspark.sql.types import LongType, MapType

    for kind, name in ((LongType(), "bigint"), (MapType(StringType(), StringType()),
                                                "map<string,string>")):
        schema = StructType([StructField("body", kind)])
        with pytest.raises(OptionError, match=f"'body' must be string or binary, not {name}"):
            BatchWriter({"url": "amqp://127.0.0.1:1", "destination": "Q"}, schema)
