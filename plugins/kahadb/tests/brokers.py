"""Real broker processes for the kahaDB tests: `relaymq run --config activemq.xml`
on ephemeral ports, stopped with SIGTERM or killed with SIGKILL, and a blocking
STOMP client that shows every frame."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from relaymq.testing import free_port
from relaymq_stomp.testing import BlockingStomp

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


class BrokerProcess:
    """One `relaymq run` on `tmp/kahadb` with a STOMP connector; its log in a file."""

    def __init__(self, tmp: Path, kahadb: str = "", extra: str = "", name: str = "kaha",
                 locker: str = "") -> None:
        self.tmp = tmp
        self.port = free_port()
        self.config = tmp / f"{name}.xml"
        self.config.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
    brokerName="{name}" dataDirectory="{tmp / name if locker else tmp}">
  <persistenceAdapter><kahaDB directory="{tmp / 'kahadb'}" {kahadb}>{locker}</kahaDB></persistenceAdapter>
  {extra}
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.port}"/>
  </transportConnectors>
</broker></beans>""")
        self.log = tmp / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait: bool = True) -> BrokerProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([RELAYMQ, "run", "--config", str(self.config)],
                                         stdout=out, stderr=subprocess.STDOUT)
        if not wait:
            return self
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError as exc:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"broker exited:\n{self.output()}") from exc
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not start listening:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


# the blocking STOMP client the process tests use
Stomp = BlockingStomp
