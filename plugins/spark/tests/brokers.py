"""A RelayMQ broker in a child process (`relaymq run`) with kahaDB and an AMQP
connector on a private port, for Spark tests: executors in other processes reach
it over the network, and crash tests kill it with SIGKILL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from relaymq.testing.net import free_port  # noqa: F401 - the tests import it from here

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


class BrokerProcess:
    def __init__(self, directory: Path, extra: str = "", persistence: str | None = None,
                 connector_options: str = "") -> None:
        self.directory = directory
        self.extra = extra
        #: the AMQP connector's URI options (e.g. ``producerCredit=4000``)
        self.connector_options = connector_options
        #: the `<persistenceAdapter>` child (default: kahaDB in DIRECTORY/kahadb)
        self.persistence = persistence
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = directory / "broker.log"
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    @property
    def data(self) -> Path:
        return self.directory / "kahadb"

    def start(self) -> BrokerProcess:
        cfg = self.directory / "activemq.xml"
        cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" brokerName="spark-test">
  <persistenceAdapter>{self.persistence or f'<kahaDB directory="{self.data}"/>'}</persistenceAdapter>
  {self.extra}
  <transportConnectors>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.port}{'?' + self.connector_options if self.connector_options else ''}"/>
  </transportConnectors>
</broker>""")
        out = open(self.log, "ab")  # noqa: SIM115 - the child writes it until it ends
        try:
            self.proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], stdout=out,
                                         stderr=subprocess.STDOUT, env=dict(os.environ))
        finally:
            out.close()
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError(f"broker exited: {self.output()[-3000:]}") from None
                if time.monotonic() >= deadline:
                    raise AssertionError("broker did not listen") from None
                time.sleep(0.05)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
