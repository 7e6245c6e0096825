"""Messages whose fields do not fit AMQP's narrower ones still reach AMQP
consumers, and bad ids stay what they were.

The AMQP header's `ttl` is a uint of milliseconds (about 49.7 days): a message
from another protocol that expires further ahead is sent without it, its
expiry in `absolute-expiry-time` (a timestamp). It used to be unencodable for
an AMQP consumer: its delivery failed, and before that the sender's receipt
and every later frame of its connection waited behind it. A delivery that still
fails to encode would fail alone (poison ack, docs/amqp.md); no field a client
can send is known to do that any more."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from relaymq.config.model import BrokerConfig
from relaymq.testing import broker_config, plugin_element

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")

from relaymq.testing.blocking_stomp import BlockingStomp, drain_queue  # noqa: E402

#: 2^32 ms is about 49.7 days
DAY_MS = 86_400_000


def kaha(tmp_path: Path) -> BrokerConfig:
    c = broker_config("amqp://127.0.0.1:0", "stomp://127.0.0.1:0", persistent=True,
                      data_directory=str(tmp_path))
    c.persistence_adapter = plugin_element("kahaDB")
    return c


def stomp_port(bt: Any) -> int:
    return int(bt.address("stomp").rpartition(":")[2])


def test_a_message_expiring_past_the_ttl_range_reaches_an_amqp_consumer(
        make_broker: Any, connect: Any, tmp_path: Path) -> None:
    bt = make_broker(config=kaha(tmp_path))
    port = stomp_port(bt)
    amqp = connect(bt.url())
    receiver = amqp.create_receiver("queue://W", credit=10)
    producer = BlockingStomp(port, timeout=10)
    assert producer.send("/queue/W", b"first")[0] == "RECEIPT"
    assert receiver.receive(timeout=10).body == "first"  # the consumer is attached
    receiver.accept()

    far = int(time.time() * 1000) + 60 * DAY_MS  # past the uint ttl
    farthest = 1 << 62  # still a long
    soon = int(time.time() * 1000) + DAY_MS  # within it
    for body, expires in ((b"far", far), (b"farthest", farthest), (b"soon", soon)):
        cmd, headers, _ = producer.send("/queue/W", body, expires=str(expires))
        assert cmd == "RECEIPT", (body, cmd, headers)
    got = {}
    for _ in range(3):
        m = receiver.receive(timeout=10)
        receiver.accept()
        got[m.body] = (m.ttl, round(m.expiry_time * 1000))
    assert got["far"] == (0, far)  # no ttl; the expiry as a timestamp
    assert got["farthest"] == (0, farthest)
    ttl, expiry = got["soon"]
    assert expiry == soon and DAY_MS - 60_000 < ttl * 1000 <= DAY_MS, got["soon"]
    producer.close()
    amqp.close()
    # nothing held back, nothing dead-lettered
    assert drain_queue(port, "W", 30) == []
    assert drain_queue(port, "ActiveMQ.DLQ", 30) == []


#: `AMQP_ULONG:` ids that name no ulong (past 2^64-1, negative, not digits, empty)
NOT_ULONGS = ["AMQP_ULONG:99999999999999999999999", f"AMQP_ULONG:{1 << 64}", "AMQP_ULONG:-1",
              "AMQP_ULONG:12ab", "AMQP_ULONG:"]


def test_an_amqp_ulong_id_outside_the_ulong_range_reaches_amqp_as_a_string(
        make_broker: Any, connect: Any) -> None:
    """A STOMP correlation-id `AMQP_ULONG:<n>` whose n is no ulong stays the
    string, as ActiveMQ keeps an id its `AMQPMessageIdHelper` cannot convert. (It
    used to become a value no AMQP encoder takes: the message went to the DLQ
    instead of the AMQP consumer.) An id in range still becomes a ulong."""
    bt = make_broker("amqp://127.0.0.1:0", "stomp://127.0.0.1:0")
    receiver = connect(bt.url()).create_receiver("queue://ids", credit=10)
    producer = BlockingStomp(stomp_port(bt), timeout=10)
    top = f"AMQP_ULONG:{(1 << 64) - 1}"
    for cid in [*NOT_ULONGS, top]:
        assert producer.send("/queue/ids", cid.encode(), **{"correlation-id": cid})[0] == "RECEIPT"
    producer.close()
    for cid in NOT_ULONGS:
        m = receiver.receive(timeout=10)
        receiver.accept()
        assert (m.body, m.correlation_id) == (cid, cid)
    m = receiver.receive(timeout=10)
    receiver.accept()
    assert (m.body, m.correlation_id) == (top, (1 << 64) - 1)
