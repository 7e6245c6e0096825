"""Fixtures: a real RelayMQ broker on its own thread, so blocking AMQP clients
(proton's BlockingConnection, a Node process) talk to it over real sockets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig
from relaymq.testing import broker_config
from relaymq.testing.threads import BrokerThread as BaseBrokerThread


class BrokerThread(BaseBrokerThread):
    """A started broker whose event loop runs on a background thread; its
    connectors as `host:port` and URLs (AMQP by default)."""

    def address(self, scheme: str = "amqp") -> str:  # type: ignore[override]
        return self.connector(scheme)

    def url(self, scheme: str = "amqp") -> str:
        return f"{scheme}://{self.address(scheme)}"


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
