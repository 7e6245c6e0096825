"""Helpers for mirror tests: brokers on threads or as processes, proton clients."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig, PluginElement
from relaymq.testing import broker_config
from relaymq.testing.waits import wait_until

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


class BrokerThread:
    """A started broker whose event loop runs on a background thread."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker: Broker | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def start(self) -> BrokerThread:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            broker = Broker(self.config, strict=True)
            await broker.start()
            self.broker = broker
        except BaseException as exc:  # noqa: BLE001
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await broker.stop()

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    @property
    def address(self) -> str:
        assert self.broker is not None
        return self.broker.connector_address("amqp")

    @property
    def url(self) -> str:
        return f"amqp://{self.address}"

    def run(self, coro: Coroutine[Any, Any, Any] | Callable[[], Coroutine[Any, Any, Any]],
            timeout: float = 30) -> Any:
        assert self.loop is not None
        c = coro() if callable(coro) else coro
        return asyncio.run_coroutine_threadsafe(c, self.loop).result(timeout)

    def call(self, fn: Callable[[], Any], timeout: float = 30) -> Any:
        async def wrapper() -> Any:
            return fn()

        return self.run(wrapper(), timeout)

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
         ids: list[str] | None = None, **props: Any) -> None:
    from proton import Message
    from proton.utils import BlockingConnection

    conn = BlockingConnection(url, timeout=30)
    try:
        sender = conn.create_sender(address)
        for i, body in enumerate(bodies):
            m = Message(body=body, durable=durable, properties=dict(props) or None)
            if ids is not None:
                m.id = ids[i]
            sender.send(m)
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
class BrokerProcess:
    """`relaymq run` with an activemq.xml of its own (kahaDB, one AMQP port)."""

    def __init__(self, tmp: Path, name: str, mirrors: str = "") -> None:
        self.tmp = tmp
        self.name = name
        self.port = free_port()
        self.dir = tmp / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.mirrors = mirrors
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "broker.log"

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def write(self) -> Path:
        cfg = self.dir / "activemq.xml"
        cfg.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
        brokerName="{self.name}" dataDirectory="{self.dir}">
  <persistenceAdapter><kahaDB directory="{self.dir / 'kahadb'}"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.port}"/>
  </transportConnectors>
  {self.mirrors}
</broker></beans>""")
        return cfg

    def start(self) -> BrokerProcess:
        cfg = self.write()
        out = open(self.log, "ab")  # noqa: SIM115 - kept by the process
        env = dict(os.environ)
        self.proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], stdout=out,
                                     stderr=subprocess.STDOUT, env=env)
        port = self.port

        def up() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"broker {self.name} exited: {self.log.read_text()[-3000:]}")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(up, f"broker {self.name} listening", timeout=60)
        return self

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
