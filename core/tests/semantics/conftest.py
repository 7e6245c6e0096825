"""Brokers for the messaging-semantics tests, built the way users configure them.

A scenario runs over vm:// only, unless it names more transports with
`@over("vm", "stomp", "amqp")`: then it runs once per transport, and `connect`
gives a client of that transport (`relaymq.testing.transports`) to a broker with that
transport's connector on a free port. The scenario's code is the same for all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig, DeadLetterStrategyConfig, PolicyEntryConfig
from relaymq.testing.transports import TRANSPORTS, connect_over, with_connector


def over(*names: str) -> pytest.MarkDecorator:
    """Run a scenario over these transports (default: vm only)."""
    assert set(names) <= set(TRANSPORTS), names
    return pytest.mark.transports(*names)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "transport" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("transports")
        metafunc.parametrize("transport", marker.args if marker else ("vm",))


@pytest.fixture
async def make_broker(transport: str) -> AsyncIterator[Callable[..., Any]]:
    brokers: list[Broker] = []

    async def make(config: BrokerConfig | None = None, **fields: Any) -> Broker:
        cfg = with_connector(config or BrokerConfig(persistent=False, **fields), transport)
        b = Broker(cfg)
        await b.start()
        brokers.append(b)
        return b

    yield make
    for b in brokers:
        await b.stop()


@pytest.fixture
async def connect(transport: str) -> AsyncIterator[Callable[..., Any]]:
    """`await connect(broker, client_id=...)`: a client of the scenario's transport."""
    conns: list[Any] = []
    if transport != "vm":
        pytest.importorskip({"stomp": "stomp", "amqp": "proton"}[transport],
                            reason=f"the {transport} client library is not installed")

    async def make(broker: Broker, **kw: Any) -> Any:
        c = await connect_over(transport, broker, **kw)
        conns.append(c)
        return c

    yield make
    for c in conns:
        await c.close()


def policy(queue: str | None = None, topic: str | None = None, **kw: Any) -> PolicyEntryConfig:
    return PolicyEntryConfig(queue=queue, topic=topic, **kw)


def dlq_strategy(**kw: Any) -> DeadLetterStrategyConfig:
    return DeadLetterStrategyConfig(**kw)
