"""Fixtures: a real RelayMQ broker on its own thread, so blocking AMQP clients
(proton's BlockingConnection, a Node process) talk to it over real sockets.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig
from relaymq.testing import broker_config


class BrokerThread:
    """A started broker whose event loop runs on a background thread."""

    def __init__(self, config: BrokerConfig, setup: Callable[[Broker], Any] | None = None) -> None:
        self.config = config
        self.setup = setup
        self.broker: Broker | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="relaymq-broker", daemon=True)

    def start(self) -> BrokerThread:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            broker = Broker(self.config, strict=True)
            if self.setup is not None:
                self.setup(broker)
            await broker.start()
            self.broker = broker
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
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

    def address(self, scheme: str = "amqp") -> str:
        assert self.broker is not None
        return self.broker.connector_address(scheme)

    def url(self, scheme: str = "amqp") -> str:
        return f"{scheme}://{self.address(scheme)}"

    def run(self, fn: Callable[[], Coroutine[Any, Any, Any]] | Coroutine[Any, Any, Any],
            timeout: float = 10) -> Any:
        """Run a coroutine on the broker's loop and return its result."""
        assert self.loop is not None
        coro = fn() if callable(fn) else fn
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], Any], timeout: float = 10) -> Any:
        """Call a plain function on the broker's loop (to read kernel state safely)."""

        async def wrapper() -> Any:
            return fn()

        return self.run(wrapper(), timeout)

    def queue_size(self, name: str) -> int:
        assert self.broker is not None
        broker = self.broker
        return self.call(lambda: broker.queue_size(name))


@pytest.fixture
def make_broker() -> Iterator[Callable[..., BrokerThread]]:
    """Start brokers with custom connectors/config: ``make_broker("amqp://127.0.0.1:0?x=1")``."""
    started: list[BrokerThread] = []

    def make(*uris: str, config: BrokerConfig | None = None,
             setup: Callable[[Broker], Any] | None = None, **fields: Any) -> BrokerThread:
        cfg = config or broker_config(*(uris or ("amqp://127.0.0.1:0",)), **fields)
        bt = BrokerThread(cfg, setup).start()
        started.append(bt)
        return bt

    yield make
    for bt in reversed(started):
        bt.stop()


@pytest.fixture
def refusing_writes() -> Callable[[str], Callable[[Broker], Any]]:
    """``make_broker(setup=refusing_writes("secret"))``: a broker whose authorization
    hook refuses writes to destinations named so (and decides nothing else)."""
    from relaymq.hookspecs import hookimpl

    def setup_for(name: str) -> Callable[[Broker], Any]:
        class RefuseWrites:
            @hookimpl
            def relaymq_authorize(self, principal: Any, action: str,
                                  destination: Any) -> bool | None:
                return False if (action == "write" and destination.name == name) else None

        return lambda b: b.plugins.register(RefuseWrites())

    return setup_for


@pytest.fixture
def amqp_broker(make_broker: Callable[..., BrokerThread]) -> BrokerThread:
    """A broker with one plain ``amqp://`` connector on a free port."""
    return make_broker("amqp://127.0.0.1:0")


@pytest.fixture
def url(amqp_broker: BrokerThread) -> str:
    return amqp_broker.url()


@pytest.fixture
def connect(url: str) -> Iterator[Callable[..., Any]]:
    """Open proton BlockingConnections to the `amqp_broker`; all closed at teardown."""
    from proton.utils import BlockingConnection

    opened: list[Any] = []

    def open_(address: str | None = None, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", 10)
        c = BlockingConnection(address or url, **kwargs)
        opened.append(c)
        return c

    yield open_
    for c in opened:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - already closed by the test or the broker
            pass
