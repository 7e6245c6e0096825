"""Messages crossing protocols: kernel messages from other transports (the vm
client here, AMQP when relaymq-amqp is installed) rendered as STOMP MESSAGEs,
and STOMP messages as other transports see them."""

from __future__ import annotations

import importlib.util

import pytest
from relaymq.client import connect_broker
from relaymq.model.destination import Destination

from .conftest import BrokerThread, connect, subscribe


def test_vm_text_and_bytes_messages_to_stomp(server: BrokerThread) -> None:
    conn, col = connect(server)
    conn.subscribe("/queue/x.vm", id="1")

    async def produce() -> None:
        vm = await connect_broker(server.broker)
        await vm.send("queue://x.vm", "héllo", properties={
            "n": 42, "f": 1.5, "b": True, "s": "str", "none": None}, priority=6,
            correlation_id="cid", type="t", reply_to="topic://replies", persistent=True)
        await vm.send("queue://x.vm", b"\x00\x01bin")
        await vm.close()

    server.run(produce())
    a, b = col.wait_messages(2)
    assert a.body == "héllo"
    h = a.headers
    assert (h["n"], h["f"], h["b"], h["s"]) == ("42", "1.5", "true", "str")
    assert "none" not in h
    assert h["priority"] == "6" and h["persistent"] == "true"
    assert h["correlation-id"] == "cid" and h["type"] == "t"
    assert h["reply-to"] == "/topic/replies"
    assert b.headers["content-length"] == "5"
    conn.disconnect()


def test_stomp_message_as_the_kernel_sees_it(server: BrokerThread, client) -> None:
    conn, col = client()
    conn.send("/queue/x.kernel", "body", headers={"persistent": "true", "priority": "8",
                                                  "type": "T", "JMSXGroupID": "g",
                                                  "reply-to": "/topic/r", "color": "blue"},
              receipt="r")
    assert col.wait_receipt("r")

    async def consume():
        vm = await connect_broker(server.broker)
        consumer = await vm.consumer("queue://x.kernel")
        received = await consumer.receive(timeout=5)
        await vm.close()
        return received.message

    m = server.run(consume())
    assert m.body == b"body"
    assert m.durable and m.priority == 8 and m.type == "T" and m.group_id == "g"
    assert m.reply_to == Destination.topic("r")
    assert m.properties == {"color": "blue"}
    assert m.message_id.startswith("ID:")


amqp_available = importlib.util.find_spec("relaymq_amqp") is not None and \
    importlib.util.find_spec("proton") is not None


@pytest.mark.skipif(not amqp_available, reason="relaymq-amqp and python-qpid-proton not installed")
def test_amqp_to_stomp_and_back(start_broker) -> None:
    from proton import Message as ProtonMessage
    from proton.utils import BlockingConnection

    bt = start_broker("stomp://127.0.0.1:0", "amqp://127.0.0.1:0", scheme="stomp")
    amqp_host, amqp_port = bt.broker.connector_address("amqp").rsplit(":", 1)
    conn, col = connect(bt)
    subscribe(conn, col, "/queue/x.amqp", id="1")
    ac = BlockingConnection(f"{amqp_host}:{amqp_port}", timeout=5)
    try:
        sender = ac.create_sender("x.amqp")
        sender.send(ProtonMessage(body="from amqp", properties={"k": 7}, durable=True,
                                  correlation_id="c1"))
        sender.send(ProtonMessage(body=b"\x01\x02", properties={"k": 8}))
        text, binary = col.wait_messages(2)
        assert text.body == "from amqp"
        assert text.headers["k"] == "7" and text.headers["persistent"] == "true"
        assert text.headers["correlation-id"] == "c1"
        assert binary.headers["content-length"] == "2"
        receiver = ac.create_receiver("x.back")
        conn.send("/queue/x.back", "from stomp", headers={"color": "red"})
        got = receiver.receive(timeout=5)
        receiver.accept()
        assert got.body in ("from stomp", b"from stomp")
        assert got.properties["color"] == "red"
    finally:
        ac.close()
        conn.disconnect()
