"""relaymq-bridge: JMS-style bridges from a destination on one broker to a
destination on another, over AMQP 1.0 or STOMP (docs/bridge.md)."""

from relaymq_bridge.bridge import Bridge, BridgeState
from relaymq_bridge.config import BridgeConfig, QualityOfService
from relaymq_bridge.manager import BridgeManager

__all__ = ["Bridge", "BridgeConfig", "BridgeManager", "BridgeState", "QualityOfService"]
