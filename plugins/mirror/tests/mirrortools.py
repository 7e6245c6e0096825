"""Helpers for mirror tests: brokers on threads or as processes, proton clients."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from proton import Message, symbol
from relaymq.config.model import BrokerConfig, PluginElement
from relaymq.testing import broker_config, free_port
from relaymq.testing.processes import RelaymqProcess
from relaymq.testing.threads import BrokerThread as BaseBrokerThread
from relaymq.testing.waits import wait_until


def mirror_element(uri: str, name: str, **mirror: str) -> PluginElement:
    attrs = {"uri": uri, "name": name, "retry-interval": "200"}
    for k in ("user", "password", "auto-start", "reconnect-attempts", "retry-interval"):
        if k in mirror:
            attrs[k] = mirror.pop(k)
    return PluginElement("amqp-connection", attrs, [PluginElement("mirror", dict(mirror))])


def make_config(port: int = 0, mirrors: list[PluginElement] | None = None,
                store: Path | None = None, **fields: Any) -> BrokerConfig:
    """A broker with one AMQP connector; `store`: kahaDB in that directory."""
    if store is not None:
        fields.setdefault("persistent", True)
        fields.setdefault("data_directory", str(store))
    cfg = broker_config(f"amqp://127.0.0.1:{port}", **fields)
    if store is not None:
        cfg.persistence_adapter = PluginElement("kahaDB", {"directory": str(store / "kahadb")})
    cfg.broker_connections = list(mirrors or [])
    return cfg


class BrokerThread(BaseBrokerThread):
    """A started broker whose event loop runs on a background thread (AMQP connector)."""

    @property  # type: ignore[override]
    def address(self) -> str:
        return self.connector("amqp")

    @property
    def url(self) -> str:
        return f"amqp://{self.address}"

    def depth(self, key: str) -> int:
        """Messages on a queue or durable subscription (0 when it does not exist)."""
        broker = self.broker
        assert broker is not None

        def read() -> int:
            region = broker.region
            holder = region.subscriptions.get(key) if key.startswith("durable://") else \
                region.queues.get(next((d for d in region.queues if d.key == key), None))  # type: ignore[arg-type]
            return int(holder.stats.pending) if holder is not None else 0

        return int(self.call(read))

    def has(self, key: str) -> bool:
        broker = self.broker
        assert broker is not None

        def read() -> bool:
            region = broker.region
            if key.startswith("durable://"):
                return key in region.subscriptions
            return any(d.key == key for d in (*region.queues, *region.topics))

        return bool(self.call(read))

    def connection_status(self, name: str) -> Any:
        broker = self.broker
        assert broker is not None
        return next(c for c in self.call(lambda: broker.management.broker_connections())
                    if c.name == name)

    def mirror_status(self, name: str) -> dict[str, Any]:
        ops = self.connection_status(name).detail.get("operations") or [{}]
        return dict(ops[0])


# -- proton clients --------------------------------------------------------------------------
def send(url: str, address: str, bodies: list[Any], durable: bool = True,
         ids: list[str] | None = None, window: int = 256, **props: Any) -> None:
    """Send `bodies` in order, up to `window` unsettled at a time (as an
    asynchronous producer does: the broker stores a window's messages with one
    sync instead of one each); returns once every one is accepted (raises
    otherwise)."""
    from proton import Delivery, Message
    from proton.utils import BlockingConnection, SendException

    conn = BlockingConnection(url, timeout=30)
    try:
        link = conn.create_sender(address).link
        unsettled: list[Any] = []

        def settle_all() -> None:
            conn.wait(lambda: all(d.settled for d in unsettled),
                      msg=f"{len(unsettled)} sends to {address} settled")
            for d in unsettled:
                if d.remote_state != Delivery.ACCEPTED:
                    raise SendException(d.remote_state)
                d.settle()
            unsettled.clear()

        for i, body in enumerate(bodies):
            m = Message(body=body, durable=durable, properties=dict(props) or None)
            if ids is not None:
                m.id = ids[i]
            unsettled.append(link.send(m))
            if len(unsettled) >= window:
                settle_all()
        settle_all()
    finally:
        conn.close()


def receive(url: str, address: str, count: int, *, container: str | None = None,
            durable_name: str | None = None, timeout: float = 20.0) -> list[Any]:
    """Receive and accept `count` messages (fewer only on timeout)."""
    from proton.reactor import DurableSubscription
    from proton.utils import BlockingConnection

    kwargs: dict[str, Any] = {"timeout": 30}
    if container:
        kwargs["container_id"] = container
    conn = BlockingConnection(url, **kwargs)
    got = []
    try:
        if durable_name:
            rcv = conn.create_receiver(address, name=durable_name, options=DurableSubscription(),
                                       credit=200)
        else:
            rcv = conn.create_receiver(address, credit=200)
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            try:
                m = rcv.receive(timeout=max(0.1, min(2.0, deadline - time.monotonic())))
            except Exception:  # noqa: BLE001 - a receive timeout
                continue
            got.append(m)
            rcv.accept()
        if durable_name:
            rcv.detach()
        else:
            rcv.close()
    finally:
        conn.close()
    return got


# -- broker processes ----------------------------------------------------------------------------
class BrokerProcess(RelaymqProcess):
    """`relaymq run` with an activemq.xml of its own (kahaDB, one AMQP port); with
    `console`, also relaymq-console on a free port, so a test reads the process's
    management listings (`api`) instead of guessing from the passing of time."""

    def __init__(self, tmp: Path, name: str, mirrors: str = "", console: bool = False,
                 args: Sequence[str] = (), stomp: bool = False, scheduler: bool = False) -> None:
        self.tmp = tmp
        self.name = name
        self.port = free_port()
        #: with `stomp`, a STOMP connector too
        self.stomp_port = free_port() if stomp else None
        self.scheduler = scheduler  # schedulerSupport="true"
        self.http_port = free_port() if console else None
        self.dir = tmp / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.mirrors = mirrors
        ports = [p for p in (self.port, self.http_port, self.stomp_port) if p is not None]
        super().__init__(self.dir / "activemq.xml", self.dir / "broker.log", ports, args=args)

    def api(self, path: str) -> Any:
        """GET `/api/v1/<path>` of this broker's console, as JSON."""
        import json
        import urllib.request
        from urllib.parse import quote

        assert self.http_port is not None, "started without console=True"
        url = f"http://127.0.0.1:{self.http_port}/api/v1/{quote(path, safe='/')}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    def mirror_statuses(self) -> list[dict[str, Any]]:
        """The status of every mirror this broker runs (`snf_depth`, `unsettled`, ...)."""
        return [dict(op) for c in self.api("broker-connections")["items"]
                for op in (c.get("detail") or {}).get("operations") or []]

    def mirror_idle(self) -> bool:
        """Every mirror is connected and has nothing stored for the target that the
        target has not accepted, and nothing sent and unsettled."""
        ops = self.mirror_statuses()
        return bool(ops) and all(op.get("state") == "connected" and op["snf_depth"] == 0
                                 and op["unsettled"] == 0 for op in ops)

    def queue_depth(self, name: str) -> int:
        """Messages on queue `name` (0 when it does not exist)."""
        import urllib.error

        try:
            return int(self.api(f"queues/{name}")["depth"])
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return 0
            raise

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def write(self) -> Path:
        console = ("" if self.http_port is None else
                   f'<plugins><console host="127.0.0.1" port="{self.http_port}"/></plugins>')
        stomp = ("" if self.stomp_port is None else
                 f'<transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>')
        scheduler = ' schedulerSupport="true"' if self.scheduler else ""
        self.config.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
        brokerName="{self.name}" dataDirectory="{self.dir}"{scheduler}>
  <persistenceAdapter><kahaDB directory="{self.dir / 'kahadb'}"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.port}"/>
    {stomp}
  </transportConnectors>
  {self.mirrors}
  {console}
</broker></beans>""")
        return self.config

    def start(self, *, wait: bool = True, timeout: float = 60.0) -> BrokerProcess:
        self.write()
        super().start(wait=wait, timeout=timeout)
        return self

    def kill9(self) -> None:
        self.kill()

    def stop(self, timeout: float = 30.0, must_stop: bool = False) -> None:
        super().stop(timeout, must_stop)


def mirror_event(body: Any, instructions: dict[str, Any] | None = None, **ann: Any) -> bytes:
    """An encoded mirror event as an Artemis source sends it: `instructions` are
    delivery annotations, `ann` message annotations (the event type as a symbol)."""
    m = Message(body=body, durable=True)
    if instructions:
        m.instructions = {symbol(k): v for k, v in instructions.items()}
    if ann:
        m.annotations = {symbol(k): symbol(v) if k == "x-opt-amq-mr-ev-type" else v
                         for k, v in ann.items()}
    return bytes(m.encode())


def mirror_xml(port: int, name: str = "B") -> str:
    """`<broker-connections>` with one mirror to 127.0.0.1:`port`, retried every 200 ms."""
    return f"""<broker-connections>
    <amqp-connection uri="tcp://127.0.0.1:{port}" name="{name}" retry-interval="200">
      <mirror/>
    </amqp-connection>
  </broker-connections>"""


def stomp_send(bp: BrokerProcess, destination: str, body: str, headers: dict[str, str]) -> None:
    """One STOMP SEND to the broker process `bp` (started with `stomp=True`), receipted."""
    import stomp

    assert bp.stomp_port is not None
    conn = stomp.Connection([("127.0.0.1", bp.stomp_port)])
    receipts: queue.Queue[str] = queue.Queue()

    class Receipts(stomp.ConnectionListener):  # type: ignore[misc]
        def on_receipt(self, frame: Any) -> None:
            receipts.put(frame.headers["receipt-id"])

    conn.set_listener("", Receipts())
    conn.connect(wait=True)
    try:
        conn.send(destination, body, headers=headers, receipt="sent")
        assert receipts.get(timeout=10) == "sent"
    finally:
        conn.disconnect()


@contextmanager
def mirrored_pair(tmp_path: Path, a_options: dict[str, bool] | None = None,
                  **options: bool) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    """Broker processes A and B (`options` for both, `a_options` for A), A mirroring
    to B and connected; both stopped afterwards."""
    b = BrokerProcess(tmp_path, "b", console=True, **options).start()
    a = BrokerProcess(tmp_path, "a", mirror_xml(b.port), console=True,
                      **{**options, **(a_options or {})})
    try:
        a.start()
        wait_until(a.mirror_idle, "A's mirror to B connected", timeout=60,
                   detail=lambda: repr(a.mirror_statuses()))
        yield a, b
    finally:
        a.stop()
        b.stop()
