"""Real broker processes for the kahaDB tests: `relaymq run --config activemq.xml`
on ephemeral ports, stopped with SIGTERM or killed with SIGKILL, and a blocking
STOMP client that shows every frame."""

from __future__ import annotations

from pathlib import Path

from relaymq.testing import free_port
from relaymq.testing.processes import RelaymqProcess
from relaymq_stomp.testing import BlockingStomp


class BrokerProcess(RelaymqProcess):
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
        super().__init__(self.config, tmp / f"{name}.log", [self.port])

    def start(self, *, wait: bool = True, timeout: float = 30.0) -> BrokerProcess:
        super().start(wait=wait, timeout=timeout)
        return self


# the blocking STOMP client the process tests use
Stomp = BlockingStomp
