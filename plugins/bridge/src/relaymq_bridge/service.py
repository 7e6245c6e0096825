"""``<bridges><bridge .../></bridges>`` inside a broker's configuration."""

from __future__ import annotations

from typing import Any

from relaymq.config.model import PluginElement
from relaymq.config.typed import convert
from relaymq.errors import ConfigError

from relaymq_bridge.bridge import Bridge
from relaymq_bridge.config import BridgeConfig
from relaymq_bridge.manager import manager_of


def local_uri(broker: Any) -> Any:
    """`vm://...` -> the hosting broker's own AMQP connector (else its STOMP one)."""

    def resolve(uri: str) -> str:
        if not uri.startswith("vm:"):
            return uri
        for scheme in ("amqp", "stomp"):
            try:
                address = broker.connector_address(scheme)
            except KeyError:
                continue
            host, _, port = address.rpartition(":")
            if host in ("0.0.0.0", "::", "[::]", ""):
                host = "127.0.0.1"
            return f"{scheme}://{host}:{port}"
        raise ConfigError(f"a bridge endpoint {uri} means this broker, which needs an amqp:// or "
                          "stomp:// transport connector for the bridge to use; add one")

    return resolve


def bridge_config(element: PluginElement, strict: bool = False) -> BridgeConfig:
    return convert(BridgeConfig, element, strict=strict).validate()


class BridgeElement:
    """One ``<bridge>``: a service the broker starts and stops."""

    def __init__(self, bridge: Bridge, broker: Any) -> None:
        self.bridge = bridge
        self.broker = broker
        self._started_once = False

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any) -> BridgeElement:
        config = bridge_config(element, bool(getattr(broker, "strict", False)))
        bridge = Bridge(config, broker.outgoing, local_uri(broker))
        manager_of(broker).add(bridge)
        return cls(bridge, broker)

    @property
    def state(self) -> str:
        """For management: the bridge's state (``running``, ``retrying``, ``failed``, ...)."""
        return self.bridge.state.value

    def status(self) -> dict[str, Any]:
        """For management: the bridge's counts, last error and connection states."""
        return self.bridge.info()

    async def start(self) -> None:
        # auto-start="false" holds the bridge at the broker's start-up only; a later start
        # (management stopping and starting the broker connection) starts it
        if self.bridge.config.auto_start or self._started_once:
            await self.bridge.start()
        self._started_once = True

    async def stop(self) -> None:
        await self.bridge.stop()  # stays listed: management may start it again
