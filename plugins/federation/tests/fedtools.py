"""Federation test support: `relaymq run` brokers with broker connections on
free ports, and proton clients (python-qpid-proton's BlockingConnection)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from proton import Message, Terminus
from proton.reactor import LinkOption
from proton.utils import BlockingConnection
from relaymq.testing.peers import free_port
from relaymq.testing.processes import RelaymqProcess


class DurableNode(LinkOption):
    """Ask for a durable node (RabbitMQ declares the queue durable, as the
    federation's sender and receiver links do; it refuses a mismatch)."""

    def apply(self, link: Any) -> None:
        node = link.target if link.is_sender else link.source
        node.durability = Terminus.CONFIGURATION


class Brokers:
    """Named `relaymq run` processes; each gets an AMQP port first, then its
    configuration (which may name the others' ports)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports: dict[str, int] = {}
        self.procs: dict[str, RelaymqProcess] = {}

    def port(self, name: str) -> int:
        if name not in self.ports:
            self.ports[name] = free_port()
        return self.ports[name]

    def url(self, name: str) -> str:
        return f"amqp://127.0.0.1:{self.port(name)}"

    def configure(self, name: str, connections: str = "", persistent: bool = False,
                  queues: tuple[str, ...] = (), plugins: str = "") -> Path:
        data = self.tmp / name
        data.mkdir(exist_ok=True)
        store = f'<persistenceAdapter><kahaDB directory="{data / "kahadb"}"/></persistenceAdapter>' \
            if persistent else ""
        cfg = self.tmp / f"{name}.xml"
        cfg.write_text(f"""<broker brokerName="{name}" persistent="{str(persistent).lower()}"
    dataDirectory="{data}" schedulerSupport="false">
  {store}
  {f"<plugins>{plugins}</plugins>" if plugins else ""}
  <transportConnectors>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.port(name)}"/>
  </transportConnectors>
  <destinations>{"".join(f'<queue physicalName="{q}"/>' for q in queues)}</destinations>
  <broker-connections>{connections}</broker-connections>
</broker>""")
        return cfg

    def start(self, name: str, connections: str = "", persistent: bool = False,
              queues: tuple[str, ...] = (), plugins: str = "") -> RelaymqProcess:
        cfg = self.configure(name, connections, persistent, queues, plugins)
        proc = RelaymqProcess(cfg, cfg.with_suffix(".log"), [self.port(name)])
        self.procs[name] = proc
        return proc.start()

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n{p.output()[-4000:]}" for n, p in self.procs.items())


def connection_xml(to: str, port: int, body: str, name: str | None = None,
                   user: str | None = None) -> str:
    cred = f' user="{user}" password="{user}"' if user else ""
    return (f'<amqp-connection uri="tcp://127.0.0.1:{port}" name="{name or "to-" + to}" '
            f'retry-interval="300"{cred}>{body}</amqp-connection>')


@contextlib.contextmanager
def client(url: str, **kwargs: Any) -> Iterator[BlockingConnection]:
    conn = BlockingConnection(url, timeout=20, **kwargs)
    try:
        yield conn
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def send(url: str, address: str, bodies: list[str], durable: bool = False, **kwargs: Any) -> None:
    with client(url, **kwargs) as c:
        s = c.create_sender(address, options=DurableNode())
        for b in bodies:
            s.send(Message(body=b, durable=durable))


def receive_all(receiver: Any, count: int, timeout: float = 20.0) -> list[str]:
    """Exactly `count` messages (accepted), within `timeout`."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"received {len(got)} of {count} messages: {got}")
        try:
            m = receiver.receive(timeout=min(left, 1.0))
        except Exception:  # noqa: BLE001 - proton's Timeout: poll again until the deadline
            continue
        got.append(m.body)
        receiver.accept()
    return got


def until_markers(receiver: Any, markers: Collection[str], timeout: float = 30.0) -> list[str]:
    """Everything that arrives (accepted) until each of `markers` has come at
    least once; raises when one is still missing after `timeout`. A marker sent
    after the messages under test travels behind them, so what a test must not
    receive (a duplicate, an excluded message) would be in this list."""
    want = set(markers)
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while want:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"markers {sorted(want)} did not arrive; got {got}")
        try:
            m = receiver.receive(timeout=min(left, 1.0))
        except Exception:  # noqa: BLE001 - proton's Timeout: poll again until the deadline
            continue
        receiver.accept()
        got.append(m.body)
        want.discard(m.body)
    return got


def before_marker(receiver: Any, marker: str, timeout: float = 30.0) -> list[str]:
    """What arrives before `marker` (which must arrive within `timeout`)."""
    got = until_markers(receiver, [marker], timeout)
    return got[:got.index(marker)]


def wait_for_log(brokers: Brokers, name: str, text: str, timeout: float = 30.0) -> None:
    """Until broker `name` has logged `text` (raises after `timeout`)."""
    deadline = time.monotonic() + timeout
    while text not in brokers.procs[name].output():
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} never logged {text!r}:\n{brokers.logs()}")
        time.sleep(0.1)


class Advisories:
    """Consumer counts a broker advises on `ActiveMQ.Advisory.Consumer.Topic.<name>`."""

    def __init__(self, url: str, kind: str, name: str) -> None:
        self.conn = BlockingConnection(url, timeout=20)
        self.receiver = self.conn.create_receiver(f"topic://ActiveMQ.Advisory.Consumer.{kind}.{name}")
        self.count: int | None = None

    def wait(self, cond: Callable[[int], bool], timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while self.count is None or not cond(self.count):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"consumer count stayed {self.count}")
            try:
                m = self.receiver.receive(timeout=min(left, 1.0))
            except Exception:  # noqa: BLE001 - timeout: poll again
                continue
            self.receiver.accept()
            self.count = int(m.properties["consumerCount"])
            json.loads(m.body)  # an advisory body is JSON
        return self.count

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
