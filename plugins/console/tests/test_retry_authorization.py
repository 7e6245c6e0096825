"""A DLQ retry sends each message back only where the authorization map lets the
console user send (write) it: admin on the DLQ is not enough. Messages whose
original destination the user may not write stay in the DLQ; the answer (the API's
JSON, the page's result line, the CLI) counts them and says why, and the audit log has the
refusal. A real broker process, real HTTP, a real STOMP producer and consumer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
from relaymq.testing import free_port, wait_until
from relaymq.testing.console_broker import ADMIN, APP, ConsoleBrokerProcess

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

#: admins own the DLQ and may send to orders.>; billing.> is the apps' alone
MAP = """<authorizationPlugin><map><authorizationMap><authorizationEntries>
      <authorizationEntry queue="ActiveMQ.DLQ" read="admins" write="admins" admin="admins"/>
      <authorizationEntry queue="orders.>" read="admins,apps" write="admins,apps" admin="apps"/>
      <authorizationEntry queue="billing.>" read="admins,apps" write="apps" admin="apps"/>
    </authorizationEntries></authorizationMap></map></authorizationPlugin>"""

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))
REFUSED = ("User ops is not authorized to retry to queue://billing.q: the broker's "
           "authorization map grants write on it to none of the user's groups")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("retry-authz")
    stomp_port = free_port()
    b = ConsoleBrokerProcess(tmp, "console-retry-authz", plugins=MAP, body=f"""
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp_port}"/>
  </transportConnectors>""")
    b.stomp_port = stomp_port  # type: ignore[attr-defined]
    b.start()
    yield b
    b.stop()


def depth(broker: ConsoleBrokerProcess, name: str) -> int:
    r = httpx.get(f"{broker.url}/api/v1/queues/{name}", auth=ADMIN, timeout=30)
    return int(r.json()["depth"]) if r.status_code == 200 else 0


def dead_letter(broker: ConsoleBrokerProcess, sends: dict[str, list[str]]) -> None:
    """`app` sends each body to its queue, then rejects each: to ActiveMQ.DLQ."""
    receipts: list[str] = []
    received: list = []

    class L(stomp.ConnectionListener):
        def on_receipt(self, frame) -> None:
            receipts.append(frame.headers["receipt-id"])

        def on_message(self, frame) -> None:
            received.append(frame)

    conn = stomp.Connection12([("127.0.0.1", broker.stomp_port)])  # type: ignore[attr-defined]
    conn.set_listener("", L())
    conn.connect(*APP, wait=True)
    total, before = 0, depth(broker, "ActiveMQ.DLQ")
    for queue, bodies in sends.items():
        for body in bodies:
            total += 1
            conn.send(f"/queue/{queue}", body, headers={"persistent": "true",
                                                        "receipt": f"r{total}"})
    wait_until(lambda: len(receipts) == total, "the receipts", 10)
    for i, queue in enumerate(sends):
        conn.subscribe(f"/queue/{queue}", id=str(i), ack="client-individual")
    wait_until(lambda: len(received) == total, "the messages", 10)
    for frame in received:
        conn.nack(frame.headers["ack"])  # to ActiveMQ.DLQ at once (no redelivery plugin)
    wait_until(lambda: depth(broker, "ActiveMQ.DLQ") == before + total, "the dead letters", 10)
    conn.disconnect()


def test_a_retry_sends_back_only_where_the_user_may_write(broker) -> None:
    dead_letter(broker, {"orders.q": ["order 1"], "billing.q": ["bill 1", "bill 2"]})
    ops = httpx.Client(base_url=broker.url, auth=ADMIN, timeout=30)
    r = ops.post("/api/v1/queues/ActiveMQ.DLQ/retry", json={"selector": "JMSMessageID IS NOT NULL"})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["retried"] == 1 and answer["refused"] == 2, answer
    assert answer["refusals"] == [{"destination": "queue://billing.q", "messages": 2,
                                   "reason": REFUSED}]
    assert f"2 messages refused and left in ActiveMQ.DLQ: {REFUSED}" in answer["note"]
    wait_until(lambda: depth(broker, "orders.q") == 1, "the order back on its queue", 10)
    assert depth(broker, "billing.q") == 0
    left = ops.get("/api/v1/queues/ActiveMQ.DLQ/messages").json()["messages"]
    assert sorted(m["body"]["preview"] for m in left) == ["bill 1", "bill 2"]
    wait_until(lambda: "denied user=ops action=retry:write destination=queue://billing.q "
                       "transport=http" in broker.output(), "the audit line", 10)


def test_the_dlq_page_says_what_the_map_kept_in_the_dlq(broker) -> None:
    dead_letter(broker, {"billing.q": ["bill 3"]})
    before = depth(broker, "ActiveMQ.DLQ")
    with httpx.Client(base_url=broker.url, follow_redirects=False, timeout=30) as ops:
        login = ops.post("/login", data={"username": ADMIN[0], "password": ADMIN[1]})
        assert login.status_code == 303
        page = ops.get("/queues/ActiveMQ.DLQ")
        csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
        done = ops.post("/queues/ActiveMQ.DLQ/retry",
                        data={"csrf": csrf, "selector": "JMSMessageID IS NOT NULL"})
        assert done.status_code == 303, done.text
        flash = unquote(done.headers["location"].partition("flash=")[2])
        assert flash.startswith("retried 0 messages; "), flash
        assert f"{before} messages refused and left in ActiveMQ.DLQ: {REFUSED}" in flash
        shown = ops.get(done.headers["location"])
        assert "refused and left in ActiveMQ.DLQ" in shown.text
    assert depth(broker, "ActiveMQ.DLQ") == before
    assert depth(broker, "billing.q") == 0


def test_the_cli_says_what_the_map_kept_in_the_dlq(broker) -> None:
    dead_letter(broker, {"billing.q": ["bill 4"]})
    before = depth(broker, "ActiveMQ.DLQ")
    done = subprocess.run([RELAYMQ, "dlq", "retry", "--url", broker.url, "--user", ADMIN[0],
                           "--password", ADMIN[1]], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("retried 0 messages; "), done.stdout
    assert f"{before} messages refused and left in ActiveMQ.DLQ: {REFUSED}" in done.stdout
    assert depth(broker, "ActiveMQ.DLQ") == before
