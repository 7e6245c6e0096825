"""A real broker process with relaymq-auth users and the console, shared by the tests."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from relaymq.testing import free_port, wait_until

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_auth", reason="relaymq-auth is not installed")

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))
ADMIN = ("ops", "ops-secret")
VIEWER = ("watcher", "watch-secret")
APP = ("app", "app-secret")


class ConsoleBroker:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.stomp_port, self.http_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.config = tmp / "activemq.xml"
        self.config.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core"
        brokerName="console-test" dataDirectory="{tmp}/data">
  <plugins>
    <simpleAuthenticationPlugin>
      <users>
        <authenticationUser username="{ADMIN[0]}" password="{ADMIN[1]}" groups="admins"/>
        <authenticationUser username="{VIEWER[0]}" password="{VIEWER[1]}" groups="users"/>
        <authenticationUser username="{APP[0]}" password="{APP[1]}" groups="apps"/>
      </users>
    </simpleAuthenticationPlugin>
    <console host="127.0.0.1" port="{self.http_port}" adminGroup="admins" viewerGroup="users"/>
  </plugins>
  <persistenceAdapter><kahaDB directory="{tmp}/data/kahadb"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
  </transportConnectors>
</broker>""")
        self.log = tmp / "broker.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([RELAYMQ, "run", "-c", str(self.config)], stdout=out,
                                         stderr=subprocess.STDOUT)

        def up() -> bool:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                return httpx.get(f"{self.url}/login", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, "the console", 40)

    def client(self, who: tuple[str, str] | None = ADMIN) -> httpx.Client:
        return httpx.Client(base_url=self.url, auth=who, timeout=30)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0, self.log.read_text()


@pytest.fixture(scope="session")
def console(tmp_path_factory: pytest.TempPathFactory):
    broker = ConsoleBroker(tmp_path_factory.mktemp("console"))
    yield broker
    broker.stop()
