"""The change feed: what the broker committed, in order, for plugins to follow.

See docs/change-feed.md. Plugins reach it as `broker.change_feed`.
"""

from relaymq.feed.events import (
    EVENT_TYPES,
    ChangeEvent,
    DestinationConfigured,
    DestinationCreated,
    DestinationDeleted,
    MessageAdded,
    MessageRemoved,
    RemovalReason,
    SubscriptionCreated,
    SubscriptionDeleted,
)
from relaymq.feed.feed import ChangeFeed, FeedSubscription

__all__ = [
    "EVENT_TYPES", "ChangeEvent", "ChangeFeed", "DestinationConfigured", "DestinationCreated",
    "DestinationDeleted", "FeedSubscription", "MessageAdded", "MessageRemoved", "RemovalReason",
    "SubscriptionCreated", "SubscriptionDeleted",
]
