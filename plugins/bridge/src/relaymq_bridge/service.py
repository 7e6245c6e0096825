"""``<bridges><bridge .../></bridges>`` inside a broker's configuration."""

from __future__ import annotations

import logging
from typing import Any

from relaymq.config.model import PluginElement
from relaymq.config.report import Report, at
from relaymq.config.typed import convert
from relaymq.errors import ConfigError

from relaymq_bridge.bridge import Bridge
from relaymq_bridge.config import BridgeConfig
from relaymq_bridge.manager import manager_of

log = logging.getLogger("relaymq.bridge")


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


def bridge_config(element: PluginElement, strict: bool = False,
                  report: Report | None = None) -> BridgeConfig:
    return convert(BridgeConfig, element, strict=strict, report=report).validate()


def checked_config(element: PluginElement, strict: bool = False,
                   report: Report | None = None) -> tuple[BridgeConfig, str | None]:
    """The bridge's configuration and, when it is unusable, why (then a stand-in
    made of what the element says, for management to show the bridge failed)."""
    try:
        return bridge_config(element, strict, report), None
    except ConfigError as exc:
        why = str(exc)
    a = element.attributes

    def attr(kebab: str) -> str:
        camel = kebab.split("-")[0] + "".join(w.capitalize() for w in kebab.split("-")[1:])
        return str(a.get(kebab) or a.get(camel) or "")

    name = attr("name") or f"<bridge>{at(element.origin)}"
    return BridgeConfig(name=name, source_uri=attr("source-uri"),
                        source_destination=attr("source-destination"),
                        target_uri=attr("target-uri"), target_destination=attr("target-destination"),
                        origin=element.origin), why


class BridgeElement:
    """One ``<bridge>``: a service the broker starts and stops."""

    def __init__(self, bridge: Bridge, broker: Any) -> None:
        self.bridge = bridge
        self.broker = broker
        self._started_once = False

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any) -> BridgeElement:
        """A bridge whose configuration is bad (an invalid selector, a bad number, a
        missing attribute) is made all the same, FAILED with the reason: the broker
        and its other bridges start, management and the log say what is wrong."""
        config, why = checked_config(element, bool(getattr(broker, "strict", False)))
        bridge = Bridge(config, broker.outgoing, local_uri(broker), config_error=why)
        if why is not None:
            log.error("bridge %s will not run: %s", config.name, why)
        manager_of(broker).add(bridge)
        return cls(bridge, broker)

    @staticmethod
    def validate_element(element: PluginElement, strict: bool = False) -> list[str]:
        """`relaymq config check` / `relaymq run`: a bad bridge is a warning (it is
        reported failed at start-up, the broker runs), and so is an attribute it
        ignores; under `--strict` both are errors."""
        report = Report(strict=strict, quiet=True)
        config, why = checked_config(element, strict, report)
        found = list(report.warnings)  # ignored attributes (errors under --strict)
        if strict and (why is not None or report.errors):
            problems = report.errors + ([f"bridge {config.name}: {why}"] if why is not None else [])
            raise ConfigError("\n".join(problems), problems)
        if why is not None:
            found.append(f"bridge {config.name} will not run (state failed): {why}")
        return found

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
