"""The management API: ``broker.management`` (see docs/management.md)."""

from relaymq.management.api import Management
from relaymq.management.events import EVENT_KINDS, ManagementEvent
from relaymq.management.info import (
    BrokerConnectionInfo,
    BrowsePage,
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    IncomingBrokerConnectionInfo,
    MessageInfo,
    ProducerInfo,
    Rates,
    Relocated,
    SubscriptionInfo,
)

__all__ = [
    "EVENT_KINDS",
    "BrokerConnectionInfo",
    "BrowsePage",
    "ConnectionInfo",
    "ConsumerInfo",
    "DestinationInfo",
    "IncomingBrokerConnectionInfo",
    "Management",
    "ManagementEvent",
    "MessageInfo",
    "ProducerInfo",
    "Rates",
    "Relocated",
    "SubscriptionInfo",
]
