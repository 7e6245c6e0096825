"""AMQP bodies that are encoded values (a map, a list, a number, an amqp-sequence)
are shown decoded, as JSON text, in the console's message view, as text bodies are
shown as text. A real broker process fed by python-qpid-proton, read over HTTP."""

from __future__ import annotations

import json

import httpx
import pytest
from relaymq.testing import free_port
from relaymq.testing.console_broker import ADMIN, APP, ConsoleBrokerProcess

pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
pytest.importorskip("proton", reason="python-qpid-proton is not installed")

from proton import Message  # noqa: E402
from proton.utils import BlockingConnection  # noqa: E402


def test_map_list_number_and_sequence_bodies_are_shown_decoded(tmp_path) -> None:
    amqp_port = free_port()
    broker = ConsoleBrokerProcess(tmp_path, "amqp-bodies", body=f"""
  <transportConnectors>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{amqp_port}"/>
  </transportConnectors>""").start()
    try:
        conn = BlockingConnection(f"amqp://127.0.0.1:{amqp_port}", user=APP[0],
                                  password=APP[1], timeout=20)
        sender = conn.create_sender("queue://bodies")
        for body in ({"name": "x", "n": 1, "nested": [1.5, True, None]}, [1, "two"], 42,
                     "plain text"):
            sender.send(Message(body=body, durable=True))
        sender.send(Message(body=[7, 8], inferred=True, durable=True))  # an amqp-sequence
        conn.close()
        with httpx.Client(base_url=broker.url, auth=ADMIN, timeout=30) as c:
            shown = c.get("/api/v1/queues/bodies/messages").json()["messages"]
            page = c.get("/queues/bodies").text
        bodies = [m["body"] for m in shown]
        assert [b["encoding"] for b in bodies] == ["json", "json", "json", "text", "json"]
        assert json.loads(bodies[0]["preview"]) == {"name": "x", "n": 1,
                                                    "nested": [1.5, True, None]}
        assert json.loads(bodies[1]["preview"]) == [1, "two"]
        assert bodies[2]["preview"] == "42"
        assert bodies[3]["preview"] == "plain text"
        assert json.loads(bodies[4]["preview"]) == [7, 8]
        assert "{&#34;name&#34;: &#34;x&#34;" in page or '{"name": "x"' in page
    finally:
        broker.stop()
