"""A real broker (kahaDB, STOMP and AMQP connectors) on its own event-loop thread,
driven by blocking real clients (stomp.py, python-qpid-proton) and inspected and
changed only through `broker.management`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
pytest.importorskip("proton", reason="python-qpid-proton is not installed")

from relaymq.config import load_config_text  # noqa: E402
from relaymq.testing.stomp_collector import Collector  # noqa: E402
from relaymq.testing.threads import BrokerThread as BaseBrokerThread  # noqa: E402
from relaymq.testing.waits import wait_until  # noqa: E402


def config_xml(data: Path, extra_policy: str = "", advisory: bool = True) -> str:
    return f"""<broker brokerName="mgmt" persistent="true" advisorySupport="{str(advisory).lower()}">
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue=">" storeCursorMemoryLimit="256 kb" {extra_policy}/>
  </policyEntries></policyMap></destinationPolicy>
  <persistenceAdapter><kahaDB directory="{data}" journalDiskSyncStrategy="never"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:0"/>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:0"/>
  </transportConnectors>
</broker>"""


class BrokerThread(BaseBrokerThread):
    """A started broker (from activemq.xml text) on a private loop in a daemon thread."""

    def __init__(self, xml: str) -> None:
        super().__init__(load_config_text(xml, "xml"), timeout=120)
        self.stomp = self.address("stomp")
        host, port = self.address("amqp")
        self.amqp = f"{host}:{port}"
        self.management = self.broker.management


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerThread]]:
    started: list[BrokerThread] = []

    def start(extra_policy: str = "", advisory: bool = True) -> BrokerThread:
        b = BrokerThread(config_xml(tmp_path / "kahadb", extra_policy, advisory))
        started.append(b)
        return b

    yield start
    for b in started:
        if b.broker.started:
            b.stop()


#: what a stomp.py connection received (messages, errors, receipts), with bounded waits
Inbox = Collector


def stomp_client(address: tuple[str, int], **connect: Any) -> tuple[Any, Inbox]:
    conn = stomp.Connection([address])
    inbox = Inbox()
    conn.set_listener("", inbox)
    conn.connect(wait=True, **connect)
    return conn, inbox


def wait_receipt(inbox: Inbox, receipt: str) -> None:
    wait_until(lambda: receipt in inbox.receipts, f"receipt {receipt}", timeout=120)
