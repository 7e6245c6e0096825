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

#: a STOMP correlation-id that names an AMQP ulong too large for one: the AMQP
#: mapping cannot encode it for an AMQP consumer (STOMP consumers get it as text)
UNENCODABLE = {"correlation-id": "AMQP_ULONG:99999999999999999999999"}


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
    assert headers["correlation-id"].replace("\\c", ":") == UNENCODABLE["correlation-id"]
    dlq.close()
