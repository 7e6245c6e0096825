"""Start real brokers in tests: embedded, with connectors on free loopback ports."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig, PluginElement, TransportConnectorConfig


def broker_config(*uris: str, persistent: bool = False, **fields: Any) -> BrokerConfig:
    """A config with connectors for `uris` (use port 0 for a free port)."""
    cfg = BrokerConfig(persistent=persistent, **fields)
    cfg.transport_connectors = [TransportConnectorConfig(None, u) for u in uris]
    return cfg


@contextlib.asynccontextmanager
async def running_broker(config: BrokerConfig | None = None, *uris: str,
                         strict: bool = True, **fields: Any) -> AsyncIterator[Broker]:
    """`async with running_broker(None, "stomp://127.0.0.1:0") as broker: ...`

    Yields a started broker; `broker.connector_address("stomp")` gives `host:port`.
    """
    cfg = config or broker_config(*uris, **fields)
    broker = Broker(cfg, strict=strict)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


def plugin_element(tag: str, children: list[PluginElement] | None = None, **attributes: str) -> PluginElement:
    """Build a config element in code: `plugin_element("kahaDB", directory=str(tmp))`."""
    return PluginElement(tag, dict(attributes), children or [])


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)
