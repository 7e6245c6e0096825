"""Brokers for the messaging-semantics tests, built the way users configure them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.client import Connection, connect_broker
from relaymq.config.model import BrokerConfig, DeadLetterStrategyConfig, PolicyEntryConfig


@pytest.fixture
async def make_broker() -> AsyncIterator[Callable[..., Any]]:
    brokers: list[Broker] = []

    async def make(config: BrokerConfig | None = None, **fields: Any) -> Broker:
        cfg = config or BrokerConfig(persistent=False, **fields)
        b = Broker(cfg)
        await b.start()
        brokers.append(b)
        return b

    yield make
    for b in brokers:
        await b.stop()


@pytest.fixture
async def connect() -> AsyncIterator[Callable[..., Any]]:
    conns: list[Connection] = []

    async def make(broker: Broker, **kw: Any) -> Connection:
        c = await connect_broker(broker, **kw)
        conns.append(c)
        return c

    yield make
    for c in conns:
        await c.close()


def policy(queue: str | None = None, topic: str | None = None, **kw: Any) -> PolicyEntryConfig:
    return PolicyEntryConfig(queue=queue, topic=topic, **kw)


def dlq_strategy(**kw: Any) -> DeadLetterStrategyConfig:
    return DeadLetterStrategyConfig(**kw)
