"""A real broker process with relaymq-auth users and the console, shared by the tests."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from relaymq.testing import free_port
from relaymq.testing.console_broker import ADMIN, APP, VIEWER, ConsoleBrokerProcess

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_auth", reason="relaymq-auth is not installed")

__all__ = ["ADMIN", "APP", "VIEWER", "ConsoleBroker", "free_port"]


class ConsoleBroker(ConsoleBrokerProcess):
    """The shared broker of the console tests: kahaDB and a STOMP connector
    (`console_attributes`: more `<console>` attributes, for a broker of a test's own)."""

    def __init__(self, tmp: Path, console_attributes: str = "") -> None:
        self.stomp_port = free_port()
        super().__init__(tmp, "console-test", attributes=f'dataDirectory="{tmp}/data"', body=f"""
  <persistenceAdapter><kahaDB directory="{tmp}/data/kahadb"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
  </transportConnectors>""", console_attributes=console_attributes)
        self.start()

    def client(self, who: tuple[str, str] | None = ADMIN) -> httpx.Client:
        return httpx.Client(base_url=self.url, auth=who, timeout=30)


@pytest.fixture(scope="session")
def console(tmp_path_factory: pytest.TempPathFactory):
    broker = ConsoleBroker(tmp_path_factory.mktemp("console"))
    yield broker
    broker.stop()
