"""Brokers built from activemq.xml text, as users configure them.

``await start(entries=[...], body=...)`` wraps ``entries`` (children of
``<virtualDestinations>``) in ``<destinationInterceptors>`` and adds ``body``
(other ``<broker>`` children) verbatim; with neither, the broker has no
``<destinationInterceptors>`` at all (the documented default applies).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.client import ClientConsumer, Connection, connect_broker
from relaymq.config.loader import load_config_text
from relaymq.config.model import BrokerConfig

BROKER = ('<broker xmlns="http://activemq.apache.org/schema/core" brokerName="vt" '
          'persistent="false">{body}</broker>')


def broker_xml(entries: list[str] | None = None, body: str = "") -> str:
    interceptors = ""
    if entries is not None:
        interceptors = ("<destinationInterceptors><virtualDestinationInterceptor>"
                        "<virtualDestinations>" + "".join(entries) + "</virtualDestinations>"
                        "</virtualDestinationInterceptor></destinationInterceptors>")
    return BROKER.format(body=interceptors + body)


StartBroker = Callable[..., Awaitable[Broker]]


@pytest.fixture
async def start() -> AsyncIterator[StartBroker]:
    brokers: list[Broker] = []

    async def _start(entries: list[str] | None = None, body: str = "", *,
                     config: BrokerConfig | None = None, strict: bool = True) -> Broker:
        cfg = config or load_config_text(broker_xml(entries, body), filename="activemq.xml",
                                         strict=strict)
        broker = Broker(cfg, strict=strict)
        await broker.start()
        brokers.append(broker)
        return broker

    yield _start
    for broker in reversed(brokers):
        await broker.stop()


@pytest.fixture
def connect() -> Callable[..., Awaitable[Connection]]:
    async def _connect(broker: Broker, **kw: Any) -> Connection:
        return await connect_broker(broker, **kw)

    return _connect


async def _texts(consumer: ClientConsumer, timeout: float = 0.1) -> list[str]:
    return [m.text for m in await consumer.receive_all(timeout)]


@pytest.fixture
def texts() -> Callable[[ClientConsumer], Awaitable[list[str]]]:
    """``await texts(consumer)``: the bodies that arrive until it goes quiet."""
    return _texts
