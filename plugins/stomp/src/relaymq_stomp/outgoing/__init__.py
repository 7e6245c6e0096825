"""Outgoing STOMP connections (`relaymq.spi.outgoing` over STOMP 1.0-1.2)."""

from relaymq_stomp.outgoing.connection import StompConnection
from relaymq_stomp.outgoing.links import StompDelivery, StompReceiver, StompSender, StompSession

__all__ = ["StompConnection", "StompDelivery", "StompReceiver", "StompSender", "StompSession"]
