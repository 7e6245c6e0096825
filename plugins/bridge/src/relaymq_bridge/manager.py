"""The bridges of a broker (or of a standalone `relaymq bridge run`), for
management: list with statistics, start, stop, pause, resume by name."""

from __future__ import annotations

from typing import Any

from relaymq_bridge.bridge import Bridge


class BridgeManager:
    """``broker.extensions["bridges"]``: a plain API the management layer wraps."""

    def __init__(self) -> None:
        self._bridges: dict[str, Bridge] = {}

    def add(self, bridge: Bridge) -> None:
        if bridge.name in self._bridges:
            raise ValueError(f"two bridges are named {bridge.name!r}; bridge names must be unique")
        self._bridges[bridge.name] = bridge

    def remove(self, bridge: Bridge) -> None:
        if self._bridges.get(bridge.name) is bridge:
            del self._bridges[bridge.name]

    def list(self) -> list[dict[str, Any]]:
        """`Bridge.info()` of every bridge: state, counts, last error, connections."""
        return [b.info() for b in self._bridges.values()]

    def get(self, name: str) -> Bridge:
        try:
            return self._bridges[name]
        except KeyError:
            known = ", ".join(self._bridges) or "none"
            raise KeyError(f"no bridge named {name!r}; configured: {known}") from None

    async def start(self, name: str) -> None:
        await self.get(name).start()

    async def stop(self, name: str) -> None:
        await self.get(name).stop()

    def pause(self, name: str) -> None:
        self.get(name).pause()

    def resume(self, name: str) -> None:
        self.get(name).resume()

    def __iter__(self) -> Any:
        return iter(list(self._bridges.values()))


def manager_of(broker: Any) -> BridgeManager:
    """The broker's manager, made on first use."""
    manager = broker.extensions.get("bridges")
    if manager is None:
        manager = broker.extensions["bridges"] = BridgeManager()
    return manager
