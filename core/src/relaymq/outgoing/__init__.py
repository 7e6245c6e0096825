"""Outgoing connections to other brokers (see `relaymq.spi.outgoing` for the
contract and docs/outgoing-connections.md for the guide)."""

from relaymq.outgoing.base import ReconnectingConnection
from relaymq.outgoing.registry import GROUP, OutgoingConnectionInfo, OutgoingConnections

__all__ = ["GROUP", "OutgoingConnectionInfo", "OutgoingConnections", "ReconnectingConnection"]
