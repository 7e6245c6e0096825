"""relaymq-bridge: JMS-style bridges from a destination on one broker to a
destination on another, over AMQP 1.0 or STOMP (docs/bridge.md)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from relaymq_bridge.config import BridgeConfig, QualityOfService

if TYPE_CHECKING:
    from relaymq_bridge.bridge import Bridge, BridgeState
    from relaymq_bridge.manager import BridgeManager

_LAZY = {
    "Bridge": "relaymq_bridge.bridge",
    "BridgeManager": "relaymq_bridge.manager",
    "BridgeState": "relaymq_bridge.bridge",
}

__all__ = ["Bridge", "BridgeConfig", "BridgeManager", "BridgeState", "QualityOfService"]


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: `relaymq <command> --help` and the
    other plugin commands import this package without needing the bridge machinery."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
