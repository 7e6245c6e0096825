"""`replaced` and `discarded` are shown where a user reads a queue's other counts:
management's `DestinationInfo`, the console's REST API (its JSON) and the
`relaymq queue stat` command. A `relaymq run` process with the console, fed and
drained by stomp.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_auth", reason="relaymq-auth is not installed")
pytest.importorskip("relaymq_console", reason="relaymq-console is not installed")

import httpx  # noqa: E402
from relaymq.testing import free_port  # noqa: E402
from relaymq.testing.console_broker import ADMIN, ConsoleBrokerProcess  # noqa: E402

from .support import Client  # noqa: E402

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


class CountersBroker(ConsoleBrokerProcess):
    """A last value queue and a queue with a dead message queue, the console and STOMP."""

    def __init__(self, tmp: Path) -> None:
        self.stomp_port = free_port()
        super().__init__(tmp, "counters-shown", attributes=f'dataDirectory="{tmp}/data"', body=f"""
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue="prices.>" queueType="lastValue"/>
    <policyEntry queue="dmq.>" deadMessageQueue="dmq.DMQ" maxRedelivery="0"/>
  </policyEntries></policyMap></destinationPolicy>
  <destinations><queue physicalName="dmq.DMQ"/></destinations>
  <persistenceAdapter><kahaDB directory="{tmp}/data/kahadb"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
  </transportConnectors>""")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = CountersBroker(tmp_path_factory.mktemp("counters-shown")).start()
    yield b
    b.stop()


def stat(broker: CountersBroker, name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([RELAYMQ, "queue", "stat", name, *args, "--url", broker.url,
                           "--user", ADMIN[0], "--password", ADMIN[1]],
                          capture_output=True, text=True, timeout=60)


def test_replaced_and_discarded_are_in_the_console_json_and_the_cli(broker) -> None:
    c = Client(broker, "c", login=ADMIN)
    for i in range(3):
        c.send("/queue/prices.shown", f"v{i}", persistent="true")  # v0, v1 replaced waiting
    c.send("/queue/dmq.shown", "not eligible", persistent="true")
    c.subscribe("/queue/dmq.shown", id="1", ack="client-individual")
    assert c.wait(1) == ["not eligible"]
    c.with_receipt(lambda rid: c.conn.nack(c.messages[0].headers["ack"], receipt=rid))
    c.subscribe("/queue/prices.shown", id="2")
    assert c.wait(2)[1] == "v2"  # the NACK was settled before: the DMQ rule ran

    http = httpx.Client(base_url=broker.url, auth=ADMIN, timeout=30)
    shown = {name: http.get(f"/api/v1/queues/{name}").json()
             for name in ("prices.shown", "dmq.shown")}
    assert {k: shown["prices.shown"][k] for k in ("replaced", "discarded", "dequeued")} == {
        "replaced": 2, "discarded": 0, "dequeued": 3}
    assert {k: shown["dmq.shown"][k] for k in ("replaced", "discarded", "dead_lettered")} == {
        "replaced": 0, "discarded": 1, "dead_lettered": 1}
    listed = {q["name"]: q for q in http.get("/api/v1/queues").json()["items"]}
    assert (listed["prices.shown"]["replaced"], listed["dmq.shown"]["discarded"]) == (2, 1)

    as_json = stat(broker, "prices.shown", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["replaced"] == 2
    text = stat(broker, "dmq.shown")
    assert text.returncode == 0, text.stderr
    assert "discarded: 1" in text.stdout.splitlines()
    assert "replaced: 0" in text.stdout.splitlines()
    c.close()
