"""Real broker processes on a JDBC store: `relaymq run --config activemq.xml` with
STOMP and AMQP connectors on free ports, killed with SIGKILL; producers that
record what the broker acknowledged."""

from __future__ import annotations

import collections
import threading
from pathlib import Path
from xml.sax.saxutils import quoteattr

from relaymq.testing import free_port
from relaymq.testing.blocking_stomp import drain_queue
from relaymq.testing.processes import RelaymqProcess
from relaymq.testing.waits import wait_until
from relaymq_stomp.testing import BlockingStomp


class BrokerProcess(RelaymqProcess):
    """One `relaymq run` with a jdbcPersistenceAdapter on `url`."""

    def __init__(self, tmp: Path, url: str, name: str, *, keep_alive: int = 500,
                 lease: int = 3000, locker: str = "", adapter: str = "",
                 kind: str = "lease-database-locker") -> None:
        self.tmp = tmp
        self.url = url
        self.name = name
        self.stomp_port = free_port()
        self.amqp_port = free_port()
        self.config = tmp / f"{name}.xml"
        self.config.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
    brokerName="{name}" dataDirectory="{tmp / name}">
  <persistenceAdapter>
    <jdbcPersistenceAdapter url={quoteattr(url)} lockKeepAlivePeriod="{keep_alive}" {adapter}>
      <locker><{kind} lockAcquireSleepInterval="{lease}" {locker}/></locker>
    </jdbcPersistenceAdapter>
  </persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.amqp_port}"/>
  </transportConnectors>
</broker></beans>""")
        super().__init__(self.config, tmp / f"{name}.log", [self.stomp_port, self.amqp_port])

    def start(self, *, wait: bool = True, timeout: float = 60) -> BrokerProcess:
        super().start(wait=wait, timeout=timeout)
        return self

    def stop(self, timeout: float = 30.0, must_stop: bool = False) -> None:
        super().stop(timeout, must_stop)  # killed past the timeout, as a crash


class Producers:
    """A STOMP and an AMQP producer of persistent messages on their own threads,
    each recording the bodies the broker acknowledged (RECEIPT / accepted).

    Losing the connection ends a producer quietly (the tests kill the broker);
    anything else -- an ERROR frame, a refused transfer, an unexpected exception --
    is recorded in `errors` and fails the test at `join()`."""

    def __init__(self, broker: BrokerProcess, queue: str, per_producer: int = 100_000) -> None:
        self.broker = broker
        self.queue = queue
        self.limit = per_producer
        self.acked: list[str] = []
        self.sent = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._stomp, daemon=True),
                         threading.Thread(target=self._amqp, daemon=True)]

    def start(self) -> Producers:
        for t in self._threads:
            t.start()
        return self

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def join(self) -> None:
        for t in self._threads:
            t.join(30)
        if any(t.is_alive() for t in self._threads):
            raise AssertionError("a producer did not stop after the broker went away")
        if self.errors:
            raise AssertionError(f"producers failed other than by losing the broker: {self.errors}")

    def _record(self, body: str) -> None:
        with self._lock:
            self.acked.append(body)

    def _stomp(self) -> None:
        try:
            client = BlockingStomp(self.broker.stomp_port)
            for i in range(self.limit):
                body = f"stomp-{i:06d}"
                with self._lock:
                    self.sent += 1
                cmd, headers, _b = client.send(f"/queue/{self.queue}", body.encode())
                if cmd != "RECEIPT":
                    with self._lock:
                        self.errors.append(f"STOMP SEND answered with {cmd}: {headers.get('message')}")
                    return
                self._record(body)
        except OSError:  # the broker was killed
            return

    def _amqp(self) -> None:
        from proton import ConnectionException, LinkException, Message, Timeout
        from proton.utils import BlockingConnection

        try:
            conn = BlockingConnection(f"amqp://127.0.0.1:{self.broker.amqp_port}", timeout=10)
            sender = conn.create_sender(f"queue://{self.queue}")
            for i in range(self.limit):
                body = f"amqp-{i:06d}"
                with self._lock:
                    self.sent += 1
                sender.send(Message(body=body, durable=True))  # returns once accepted
                self._record(body)
        except (ConnectionException, LinkException, Timeout, OSError):
            return  # the broker was killed mid-send
        except Exception as exc:  # noqa: BLE001 - a refused transfer or a defect: fail the test
            with self._lock:
                self.errors.append(f"AMQP producer: {exc!r}")


def check_exactly_once(acked: list[str], got: list[str]) -> None:
    counts = collections.Counter(got)
    duplicates = {b: n for b, n in counts.items() if n > 1}
    assert not duplicates, f"delivered more than once: {list(duplicates.items())[:10]}"
    missing = sorted(set(acked) - set(counts))
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:10]}"


def fail_over_under_load(master: BrokerProcess, slave: BrokerProcess, queue: str) -> None:
    """Producers on `master` until 200 messages are stored, then kill -9 it: `slave`
    takes over (within 30 s: a lease and an acquire interval, with room for a slow
    machine) and holds every acknowledged message exactly once."""
    producers = Producers(master, queue).start()
    wait_until(lambda: producers.count() >= 200, "messages stored on the master", 60,
               detail=master.output)
    master.kill()
    producers.join()
    acked = list(producers.acked)
    slave.wait_listening(timeout=30)
    assert "this broker is now the master" in slave.output()
    check_exactly_once(acked, drain_queue(slave.stomp_port, queue))
