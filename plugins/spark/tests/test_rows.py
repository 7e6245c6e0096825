"""Rows from stored AMQP bytes (what executors read): every column, for messages
encoded by python-qpid-proton as a client sends them."""

from __future__ import annotations

import datetime as dt
import uuid

from proton import Message, symbol
from relaymq_spark.rows import encoded_row

COLUMNS = [("region", "string"), ("amount", "double"), ("n", "long"), ("missing", "string")]


def row(m: Message, stamp: int = 1_700_000_000_123) -> list:
    return encoded_row("queue://Q", 42, stamp, m.encode(), COLUMNS)


def test_every_column_of_a_full_message() -> None:
    m = Message(body="héllo", id="id-1", durable=True, priority=7, ttl=5.0, correlation_id="c-1",
                subject="order", group_id="g", reply_to="queue://R", address="queue://Q",
                content_type="text/plain", user_id=b"app", delivery_count=2,
                creation_time=1_700_000_001.5, expiry_time=1_700_000_009.25,
                properties={"region": "eu", "amount": 10.5, "n": 3},
                annotations={symbol("x-opt-origin"): "east"})
    r = row(m)
    assert r[:12] == ["héllo".encode(), "héllo", "id-1", "queue://Q", 42,
                      dt.datetime(2023, 11, 14, 22, 13, 21, 500000),
                      dt.datetime(2023, 11, 14, 22, 13, 29, 250000), 7, True, "c-1", "order", "g"]
    assert r[12] == {"durable": "true", "ttl": "5000", "content_type": "text/plain",
                     "reply_to": "queue://R", "user_id": "app", "to": "queue://Q",
                     "x-opt-origin": "east"}
    assert r[13] == {"region": "eu", "amount": "10.5", "n": "3"}
    assert r[14:] == ["eu", 10.5, 3, None]


def test_bare_message_defaults_and_the_broker_timestamp() -> None:
    r = row(Message(body=b"\x00\xff"))
    assert r[:12] == [b"\x00\xff", "\x00\ufffd", None, "queue://Q", 42,
                      dt.datetime(2023, 11, 14, 22, 13, 20, 123000), None, 4, False, None, None,
                      None]
    assert r[12] == {} and r[13] == {} and r[14:] == [None, None, None, None]


def test_other_bodies_and_ids() -> None:
    uid = uuid.UUID(int=7)
    assert row(Message(body=None, id=uid))[:3] == [None, None, str(uid)]
    assert row(Message(body={"k": 1}, id=17))[:3] == [b"{'k': 1}", "{'k': 1}", "17"]
    assert row(Message(body=12))[:2] == [b"12", "12"]
    bad = row(Message(properties={"amount": "not-a-number"}))
    assert bad[13] == {"amount": "not-a-number"} and bad[15] is None
