"""Interop with rhea, a second AMQP 1.0 implementation (Node.js), driven by
``tests/node/interop.js``. Skipped with the reason when node or npm is absent."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from proton import Message

NODE_DIR = Path(__file__).parent / "node"


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the rhea interop test; install Node.js to run it")
    if not (NODE_DIR / "node_modules" / "rhea").is_dir():
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            pytest.skip(f"npm ci could not install rhea (offline?): {done.stderr.strip()[-300:]}")
    return node


def run(node: str, *args: Any) -> dict[str, Any]:
    done = subprocess.run([node, "interop.js", *map(str, args)], cwd=NODE_DIR,
                          capture_output=True, text=True, timeout=60)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no result from node (exit {done.returncode}): {done.stderr[-2000:]}"
    result = json.loads(lines[-1])
    assert "error" not in result, result
    return result


def port_of(broker: Any) -> int:
    return int(broker.address().rpartition(":")[2])


def test_rhea_sends_and_proton_receives(node: str, amqp_broker: Any, connect: Any) -> None:
    assert run(node, "send", port_of(amqp_broker), "queue://from-rhea", 8) == {"sent": 8, "accepted": 8}
    r = connect().create_receiver("queue://from-rhea", credit=8)
    got = [r.receive(timeout=5) for _ in range(8)]
    assert [m.id for m in got] == [f"rhea-{i}" for i in range(8)]
    assert got[0].body == "text 0" and got[1].body == bytes([1, 1, 2, 3])
    assert got[2].body == {"map": 2, "nested": [1, "two"]} and got[3].body == [3, "list"]
    assert all(m.properties["who"] == "rhea" and m.subject == "kind" and m.priority == 7 for m in got)
    assert [m.durable for m in got[:2]] == [True, False]


def test_proton_sends_and_rhea_receives(node: str, amqp_broker: Any, connect: Any) -> None:
    s = connect().create_sender("queue://to-rhea")
    for i in range(5):
        s.send(Message(body=f"p{i}", id=f"py-{i}", properties={"n": i}, durable=True))
    result = run(node, "receive", port_of(amqp_broker), "queue://to-rhea", 5)
    msgs = result["messages"]
    assert [m["body"] for m in msgs] == [f"p{i}" for i in range(5)]
    assert [m["id"] for m in msgs] == [f"py-{i}" for i in range(5)]
    assert all(m["durable"] and m["props"] == {"n": i} for i, m in enumerate(msgs))


def test_rhea_scenario(node: str, amqp_broker: Any) -> None:
    checks = run(node, "scenario", port_of(amqp_broker))["checks"]
    assert checks["round_trip"] == "hello"
    assert checks["redelivery_counts"] == [0, 0, 1]
    assert checks["selector"] == "red"
    assert checks["dynamic_address"].startswith("temp-queue://") and checks["dynamic_body"] == "reply"
    assert "ANONYMOUS-RELAY" in checks["offered"] and checks["relay"] == "relayed"
    assert checks["topic"] == ["extra", "extra"]
    assert checks["invalid_selector"] == "amqp:invalid-field"


def test_rhea_sasl_plain(node: str, make_broker: Any) -> None:
    from relaymq.broker.security import Principal
    from relaymq.errors import SecurityError
    from relaymq.hookspecs import hookimpl

    class Check:
        @hookimpl
        def relaymq_authenticate(self, request: Any) -> Principal | None:
            if (request.username, request.password) != ("rhea", "s3cret"):
                raise SecurityError("refused")
            return Principal("rhea")

    bt = make_broker(setup=lambda b: b.plugins.register(Check()))
    assert run(node, "scenario", port_of(bt), "rhea", "s3cret")["checks"]["round_trip"] == "hello"
    done = subprocess.run([node, "interop.js", "scenario", str(port_of(bt)), "rhea", "wrong"],
                          cwd=NODE_DIR, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "error" in done.stdout
