"""A message that cannot be delivered to an AMQP consumer (its fields do not
convert to AMQP) fails only itself: its sender still gets the receipt for what
was stored, the messages around it reach the consumer at once, and it is not
lost (the poison ack sends it to the dead-letter queue, as ActiveMQ's AMQP
transport does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from relaymq.config.model import BrokerConfig
from relaymq.testing import broker_config, plugin_element

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")

from relaymq.testing.blocking_stomp import BlockingStomp, drain_queue  # noqa: E402

#: an expiry more than 2^32-1 ms (about 49 days) away: the AMQP header's ttl is a
#: uint, so the AMQP mapping cannot encode it for an AMQP consumer (STOMP consumers
#: get it as text; ActiveMQ's `UnsignedInteger.valueOf` fails the same way). (A
#: `correlation-id:AMQP_ULONG:<n>` past 2^64 was the first such field; it is now
#: kept as a string id, as ActiveMQ keeps it: see the test at the end. A
#: `JMSXGroupSeq` past the uint range was the next; a SEND now refuses it: see
#: plugins/stomp/tests/test_numeric_header_ranges.py.)
UNENCODABLE_EXPIRY = 1 << 62
UNENCODABLE = {"expires": str(UNENCODABLE_EXPIRY)}


def kaha(tmp_path: Path) -> BrokerConfig:
    c = broker_config("amqp://127.0.0.1:0", "stomp://127.0.0.1:0", persistent=True,
                      data_directory=str(tmp_path))
    c.persistence_adapter = plugin_element("kahaDB")
    return c


def stomp_port(bt: Any) -> int:
    return int(bt.address("stomp").rpartition(":")[2])


def test_a_send_stored_before_its_delivery_fails_still_gets_its_receipt(
        make_broker: Any, connect: Any, tmp_path: Path) -> None:
    bt = make_broker(config=kaha(tmp_path))
    receiver = connect(bt.url()).create_receiver("queue://W", credit=10)
    producer = BlockingStomp(stomp_port(bt), timeout=10)
    assert producer.send("/queue/W", b"first")[0] == "RECEIPT"
    assert receiver.receive(timeout=10).body == "first"  # the consumer is attached
    receiver.accept()

    # Stored, then made visible: delivering it to the AMQP consumer fails. The
    # store write succeeded, so the SEND is answered (it used to wait for ever,
    # and every later frame of the connection behind it).
    cmd, headers, _ = producer.send("/queue/W", b"unencodable", **UNENCODABLE)
    assert cmd == "RECEIPT", (cmd, headers)
    cmd, headers, _ = producer.send("/queue/W", b"after")
    assert cmd == "RECEIPT", (cmd, headers)
    assert receiver.receive(timeout=10).body == "after"
    receiver.accept()
    producer.close()


def test_an_unencodable_message_goes_to_the_dlq_and_the_others_arrive(
        make_broker: Any, connect: Any, tmp_path: Path) -> None:
    bt = make_broker(config=kaha(tmp_path))
    port = stomp_port(bt)
    amqp = connect(bt.url())
    receiver = amqp.create_receiver("queue://U", credit=10)
    producer = BlockingStomp(port, timeout=10)
    assert producer.send("/queue/U", b"m1")[0] == "RECEIPT"
    assert receiver.receive(timeout=10).body == "m1"  # the consumer is attached
    receiver.accept()

    for body, headers in ((b"m2", {}), (b"unencodable", UNENCODABLE), (b"m3", {})):
        cmd, answer, _ = producer.send("/queue/U", body, **headers)
        assert cmd == "RECEIPT", (body, cmd, answer)
    # the messages around it reach the AMQP consumer now, not with a later send
    got = []
    for _ in range(2):
        got.append(receiver.receive(timeout=10).body)
        receiver.accept()
    assert got == ["m2", "m3"]
    producer.close()
    amqp.close()  # (a message it still held would go back to the queue now)

    # not lost: the poison ack moved it to the dead-letter queue, with its fields;
    # the queue itself holds nothing more
    assert drain_queue(port, "U", 30) == []
    dlq = BlockingStomp(port, timeout=10)
    dlq.frame("SUBSCRIBE", {"destination": "/queue/ActiveMQ.DLQ", "id": "d", "ack": "auto"})
    cmd, headers, body = dlq.read()
    assert (cmd, body) == ("MESSAGE", b"unencodable"), (cmd, headers, body)
    assert (headers.get("originalExpiration") or headers["expires"]) == str(UNENCODABLE_EXPIRY), \
        headers
    dlq.close()


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
