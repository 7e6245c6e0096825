"""A started broker on a private event loop in a daemon thread, for tests whose
clients block (stomp.py, proton's BlockingConnection): the test is a plain function
and reaches into the broker with `call` (runs on the broker's loop).

Plugins' test suites subclass it for what only they need (the AMQP and mirror
tests' `BrokerThread`), rather than each keeping a copy of the thread handling.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig
from relaymq.testing.brokers import host_port


class BrokerThread:
    """`BrokerThread(config)` starts the broker (raising what its start raised);
    `stop()` stops it and its loop."""

    def __init__(self, config: BrokerConfig, setup: Callable[[Broker], Any] | None = None,
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
                 timeout: float = 30) -> None:
        self.config = config
        self.timeout = timeout
        self.loop = loop_factory()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="relaymq-broker")
        self._thread.start()

        async def start() -> Broker:
            broker = Broker(config, strict=True)
            if setup is not None:
                setup(broker)
            await broker.start()
            return broker

        try:
            self.broker: Broker = self.run(start())
        except BaseException:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
            raise

    def start(self) -> BrokerThread:
        """The broker is started by the constructor; `BrokerThread(cfg).start()` reads well."""
        return self

    def run(self, coro: Coroutine[Any, Any, Any] | Callable[[], Coroutine[Any, Any, Any]],
            timeout: float | None = None) -> Any:
        """Run `coro` (or what `coro()` returns) on the broker's loop; its result."""
        c = coro() if callable(coro) else coro
        return asyncio.run_coroutine_threadsafe(c, self.loop).result(timeout or self.timeout)

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """Call `fn` on the broker's loop (to read kernel state safely); its result."""

        async def wrapper() -> Any:
            return fn()

        return self.run(wrapper(), timeout)

    def address(self, scheme: str) -> tuple[str, int]:
        """(host, port) of the connector for `scheme`."""
        return host_port(self.broker.connector_address(scheme))

    def connector(self, scheme: str) -> str:
        """`host:port` of the connector for `scheme`."""
        return self.broker.connector_address(scheme)

    def queue_size(self, name: str) -> int:
        return int(self.call(lambda: self.broker.queue_size(name)))

    def stats(self, key: str) -> dict[str, int]:
        """The broker's counters for a destination key (`queue://name`)."""
        return dict(self.call(lambda: self.broker.destination_stats().get(key, {})))

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self.run(self.broker.stop())
        finally:
            try:  # what the broker left running is cancelled, as asyncio.run does
                self.run(_cancel_the_rest(), 10)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(10)


async def _cancel_the_rest() -> None:
    current = asyncio.current_task()
    rest = [t for t in asyncio.all_tasks() if t is not current]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)
