"""Rows from stored AMQP bytes (what executors read): every column, for messages
encoded by python-qpid-proton as a client sends them, through the column lists
(`columns.add_encoded`) and the Arrow record batch Spark gets (`columns_batch`)."""

from __future__ import annotations

import datetime as dt
import uuid

from proton import Message, symbol
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from relaymq_spark.columns import Columns, add_encoded_many
from relaymq_spark.rows import columns_batch

COLUMNS = [("region", "string"), ("amount", "double"), ("n", "long"), ("missing", "string")]
S = StringType()
SCHEMA = to_arrow_schema(StructType([
    StructField("body", BinaryType()), StructField("body_string", S),
    StructField("message_id", S), StructField("destination", S),
    StructField("sequence", LongType()), StructField("timestamp", TimestampType()),
    StructField("expiration", TimestampType()), StructField("priority", IntegerType()),
    StructField("redelivered", BooleanType()), StructField("correlation_id", S),
    StructField("type", S), StructField("group_id", S), StructField("headers", MapType(S, S)),
    StructField("properties", MapType(S, S)), StructField("body_type", S),
    StructField("region", S),
    StructField("amount", DoubleType()), StructField("n", LongType()),
    StructField("missing", S)]), timezone="UTC")
UTC = dt.UTC


def rows(*messages: Message, stamp: int = 1_700_000_000_123) -> list[list]:
    cols = Columns([n for n, _ in COLUMNS])
    add_encoded_many(cols, "queue://Q", [(42 + i, stamp, m.encode())
                                         for i, m in enumerate(messages)])
    batch = columns_batch(cols, COLUMNS, SCHEMA)
    out = []
    for r in batch.to_pylist():
        values = list(r.values())
        values[12] = dict(values[12])
        values[13] = dict(values[13])
        out.append(values)
    return out


def row(m: Message, stamp: int = 1_700_000_000_123) -> list:
    return rows(m, stamp=stamp)[0]


def test_every_column_of_a_full_message() -> None:
    m = Message(body="héllo", id="id-1", durable=True, priority=7, ttl=5.0, correlation_id="c-1",
                subject="order", group_id="g", reply_to="queue://R", address="queue://Q",
                content_type="text/plain", user_id=b"app", delivery_count=2,
                creation_time=1_700_000_001.5, expiry_time=1_700_000_009.25,
                properties={"region": "eu", "amount": 10.5, "n": 3},
                annotations={symbol("x-opt-origin"): "east"})
    r = row(m)
    assert r[:12] == ["héllo".encode(), "héllo", "id-1", "queue://Q", 42,
                      dt.datetime(2023, 11, 14, 22, 13, 21, 500000, tzinfo=UTC),
                      dt.datetime(2023, 11, 14, 22, 13, 29, 250000, tzinfo=UTC), 7, True, "c-1",
                      "order", "g"]
    assert r[12] == {"durable": "true", "ttl": "5000", "content_type": "text/plain",
                     "reply_to": "queue://R", "user_id": "app", "to": "queue://Q",
                     "x-opt-origin": "east"}
    assert r[13] == {"region": "eu", "amount": "10.5", "n": "3"}
    assert r[14] == "text"
    assert r[15:] == ["eu", 10.5, 3, None]


def test_bare_message_defaults_and_the_broker_timestamp() -> None:
    r = row(Message(body=b"\x00\xff"))
    assert r[:12] == [b"\x00\xff", "\x00\ufffd", None, "queue://Q", 42,
                      dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC), None, 4, False,
                      None, None, None]
    assert r[12] == {} and r[13] == {} and r[14:] == ["bytes", None, None, None, None]


def test_other_bodies_and_ids() -> None:
    uid = uuid.UUID(int=7)
    empty = row(Message(body=None, id=uid))
    assert empty[:3] == [None, None, str(uid)] and empty[14] == "empty"
    value = row(Message(body={"k": 1}, id=17))
    assert value[:3] == [b"{'k': 1}", "{'k': 1}", "17"] and value[14] == "amqp-value"
    assert row(Message(body=12))[:2] == [b"12", "12"]
    bad = row(Message(properties={"amount": "not-a-number"}))
    assert bad[13] == {"amount": "not-a-number"} and bad[16] is None


def test_maps_and_columns_stay_in_their_rows() -> None:
    got = rows(Message(body="a", properties={"region": "eu"}), Message(body="b"),
               Message(body="c", properties={"n": 5, "region": "us"}, durable=True))
    assert [(r[1], r[4], r[12], r[13], r[15], r[17]) for r in got] == [
        ("a", 42, {}, {"region": "eu"}, "eu", None),
        ("b", 43, {}, {}, None, None),
        ("c", 44, {"durable": "true"}, {"n": "5", "region": "us"}, "us", 5)]


def test_booleans_read_as_true_and_false_in_both_maps() -> None:
    """As the headers map shows `durable` (and as JMS and the broker write
    booleans), not as Python's `True`/`False`."""
    got = row(Message(body="b", durable=True, properties={"vip": True, "late": False, "n": 1},
                      annotations={symbol("x-opt-flag"): True}))
    assert got[13] == {"vip": "true", "late": "false", "n": "1"}
    assert got[12]["durable"] == "true" and got[12]["x-opt-flag"] == "true"
