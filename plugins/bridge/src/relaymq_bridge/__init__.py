"""relaymq-bridge: JMS-style bridges from a destination on one broker to a
destination on another, over AMQP 1.0 or STOMP (docs/bridge.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from relaymq.lazy_names import lazy_names

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


__getattr__ = lazy_names(__name__, _LAZY)
