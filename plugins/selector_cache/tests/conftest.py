"""Brokers with a selector-aware virtual topic and the selector cache, from activemq.xml text.

The cache only matters to selector-aware virtual topics, so these tests need
relaymq-virtual-topic too (a workspace member; the modules that need it skip
where it is absent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.client import ClientConsumer
from relaymq.config.loader import load_config_text
from relaymq.testing.barriers import before_marker

#: A selector-aware virtual topic whose consumer queues exist from the start
#: (declared, as <destinations> does in ActiveMQ), so they survive a restart of
#: a broker with the memory store.
BROKER = """\
<broker xmlns="http://activemq.apache.org/schema/core" brokerName="sc" persistent="false">
  <destinationInterceptors>
    <virtualDestinationInterceptor>
      <virtualDestinations>
        <virtualTopic name="VirtualTopic.>" prefix="Consumer.*." selectorAware="true"/>
      </virtualDestinations>
    </virtualDestinationInterceptor>
  </destinationInterceptors>
  <destinations>
    <queue physicalName="Consumer.A.VirtualTopic.Orders"/>
    <queue physicalName="Consumer.B.VirtualTopic.Orders"/>
  </destinations>
  {plugins}
</broker>
"""


def cache_element(persist_file: Path | None = None, **attrs: str) -> str:
    if persist_file is not None:
        attrs["persistFile"] = str(persist_file)
    text = " ".join(f'{k}="{v}"' for k, v in attrs.items())
    return f"<plugins><virtualSelectorCacheBrokerPlugin {text}/></plugins>"


StartBroker = Callable[..., Awaitable[Broker]]


@pytest.fixture
async def start() -> AsyncIterator[StartBroker]:
    """``await start(plugins_xml)``; ``plugins_xml=None`` means no selector cache."""
    brokers: list[Broker] = []

    async def _start(plugins: str | None = "<plugins><virtualSelectorCacheBrokerPlugin/></plugins>",
                     **kw: Any) -> Broker:
        cfg = load_config_text(BROKER.format(plugins=plugins or ""), filename="activemq.xml")
        broker = Broker(cfg, strict=True, **kw)
        await broker.start()
        brokers.append(broker)
        return broker

    yield _start
    for broker in reversed(brokers):
        await broker.stop()


async def _texts(consumer: ClientConsumer, *, properties: dict[str, Any] | None = None
                 ) -> list[str]:
    """The bodies `consumer` receives before a marker its connection sends to the
    consumer's queue (`relaymq.testing.barriers`): a late or doubled copy counts.
    A consumer with a selector needs marker `properties` that it selects."""
    kernel = consumer.consumer
    if kernel.selector is not None and properties is None:
        raise AssertionError(f"texts() needs marker properties that {kernel.selector_text!r} "
                             f"selects")
    return await before_marker(consumer._conn, str(kernel.destination), consumer,
                               properties=properties)


@pytest.fixture
def texts() -> Callable[..., Awaitable[list[str]]]:
    return _texts
