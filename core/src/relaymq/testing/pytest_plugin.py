"""pytest fixtures for embedding RelayMQ (entry point `pytest11: relaymq`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from relaymq.broker.broker import Broker

try:  # explicit asyncio fixtures work with pytest-asyncio in strict and auto mode
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover - without pytest-asyncio, another async plugin runs them
    async_fixture = pytest.fixture  # type: ignore[assignment]
from relaymq.client import Connection, connect_broker
from relaymq.config.model import BrokerConfig


@async_fixture
async def broker() -> AsyncIterator[Broker]:
    """A started embedded broker with the memory store and no network connectors."""
    b = Broker(BrokerConfig(persistent=False, scheduler_support=True))
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


@async_fixture
async def vm_connection(broker: Broker) -> AsyncIterator[Connection]:
    """A client connection to the `broker` fixture."""
    conn = await connect_broker(broker, client_id="test-client")
    try:
        yield conn
    finally:
        await conn.close()
