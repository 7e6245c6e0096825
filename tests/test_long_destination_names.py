"""A destination name too long for the store (kahaDB writes a key's length as a u16)
is refused before anything is made, on every path that creates destinations: the
console's create, a STOMP SEND and SUBSCRIBE, an AMQP attach. That request fails
alone; the connection's other work and other clients go on, nothing half-made is
listed, and the broker restarts from its store."""

from __future__ import annotations

import pytest

pytest.importorskip("relaymq_console", reason="relaymq-console is not installed")
pytest.importorskip("relaymq_auth", reason="relaymq-auth is not installed")
pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
pytest.importorskip("proton", reason="python-qpid-proton is not installed")

import httpx  # noqa: E402
from proton import Message  # noqa: E402
from proton.utils import BlockingConnection, LinkDetached  # noqa: E402
from relaymq.testing import free_port, wait_until  # noqa: E402
from relaymq.testing.console_broker import ADMIN, APP, ConsoleBrokerProcess  # noqa: E402

#: "queue://" and this is over 65,535 bytes of UTF-8
LONG = "long." + "x" * 70_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("longnames")
    stomp_port, amqp_port = free_port(), free_port()
    b = ConsoleBrokerProcess(tmp, "long-names", attributes=f'dataDirectory="{tmp}/data"', body=f"""
  <persistenceAdapter><kahaDB directory="{tmp}/data/kahadb"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp_port}?maxHeaderLength=200000"/>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{amqp_port}"/>
  </transportConnectors>""")
    b.stomp_port, b.amqp_port = stomp_port, amqp_port  # type: ignore[attr-defined]
    b.start()
    yield b
    b.stop()


def listed(broker, kind: str = "queues") -> list[str]:
    with httpx.Client(base_url=broker.url, auth=ADMIN, timeout=30) as c:
        r = c.get(f"/api/v1/{kind}", params={"filter": "long.", "size": 1000})
        assert r.status_code == 200, r.text
        return [q["name"] for q in r.json()["items"]]


def test_the_console_refuses_a_name_the_store_cannot_hold(broker) -> None:
    with httpx.Client(base_url=broker.url, auth=ADMIN, timeout=30) as c:
        r = c.post("/api/v1/queues", json={"name": LONG})
        assert r.status_code == 400, r.text[:300]
        assert "too long" in r.json()["error"] and "at most 65535 bytes" in r.json()["error"]
        assert c.post("/api/v1/queues", json={"name": "long.ok"}).status_code == 200
    assert listed(broker) == ["long.ok"]


class Frames(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.receipts: list[str] = []

    def on_error(self, frame) -> None:
        self.errors.append(frame.headers.get("message", ""))

    def on_receipt(self, frame) -> None:
        self.receipts.append(frame.headers["receipt-id"])


def test_stomp_send_and_subscribe_fail_alone(broker) -> None:
    conn = stomp.Connection12([("127.0.0.1", broker.stomp_port)])
    frames = Frames()
    conn.set_listener("", frames)
    conn.connect(*APP, wait=True)
    conn.send(f"/queue/{LONG}", "x", headers={"persistent": "true", "receipt": "long"})
    wait_until(lambda: frames.errors, "the ERROR frame", 10)
    assert "too long" in frames.errors[0]
    conn.subscribe(f"/queue/{LONG}", id="q", headers={"receipt": "sub"})
    wait_until(lambda: len(frames.errors) == 2, "the second ERROR frame", 10)
    assert "too long" in frames.errors[1]
    # the same connection goes on
    conn.send("/queue/long.stomp", "fine", headers={"persistent": "true", "receipt": "ok"})
    wait_until(lambda: "ok" in frames.receipts, "the receipt of the next SEND", 10)
    assert "long" not in frames.receipts
    conn.disconnect()
    assert sorted(listed(broker)) == ["long.ok", "long.stomp"]


def test_an_amqp_attach_is_refused_and_the_connection_goes_on(broker) -> None:
    # frames large enough for the attach: the store's limit is what refuses it
    conn = BlockingConnection(f"amqp://127.0.0.1:{broker.amqp_port}", user=APP[0],
                              password=APP[1], timeout=20, max_frame_size=1024 * 1024)
    try:
        with pytest.raises(LinkDetached) as refused:
            conn.create_receiver(f"queue://{LONG}", name="long-receiver")
        assert "too long" in str(refused.value)
        # a sender's attach makes nothing, but it is refused all the same: its first
        # message could not make the queue
        with pytest.raises(LinkDetached) as refused:
            conn.create_sender(f"queue://{LONG}", name="long-sender")
        assert "too long" in str(refused.value)
        sender = conn.create_sender("queue://long.amqp")
        sender.send(Message(body="fine", durable=True))
    finally:
        conn.close()
    assert sorted(listed(broker)) == ["long.amqp", "long.ok", "long.stomp"]


def test_the_broker_restarts_with_what_it_made(broker) -> None:
    broker.stop()
    broker.start()
    assert sorted(listed(broker)) == ["long.amqp", "long.ok", "long.stomp"]
