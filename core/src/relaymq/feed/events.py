"""What the change feed reports: one frozen dataclass per kind of change.

Every event describes work the broker has *committed* (written to its store, or
made visible when nothing needed writing) and says where it came from: `origin`
is None for work done for this broker's own clients, or the broker id of the
mirror/federation peer whose connection caused it (`ClientConnection.origin`,
`SendContext.origin`, `Message.origin`), so broker-to-broker plugins can avoid
loops. Work that was rolled back never produces an event.

Events of the per-message kinds (`MessageAdded`, `MessageRemoved`) are made on
the hot path, so the broker builds them with `relaymq.feed.constructors`
(compiled; slot setters, about half the cost of a frozen dataclass's own
`__init__`); they compare, print and refuse assignment like any frozen
dataclass. Each class is documented in docs/change-feed.md (a test keeps that
true).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Union

from relaymq.model.destination import Destination
from relaymq.model.message import Message


class RemovalReason:
    """Why a message left a queue or subscription (`MessageRemoved.reason`)."""

    ACKED: Final = "acked"  # a consumer acknowledged it
    EXPIRED: Final = "expired"  # its time to live ran out (dead-lettered or discarded)
    KILLED: Final = "killed"  # dead-lettered or discarded: rejected, poison, redeliveries exceeded
    REPLACED: Final = "replaced"  # superseded by a newer message (last-value queue types)
    MOVED: Final = "moved"  # moved to another destination by management
    PURGED: Final = "purged"  # removed by a purge

    ALL: Final = (ACKED, EXPIRED, KILLED, REPLACED, MOVED, PURGED)


@dataclass(frozen=True, slots=True)
class MessageAdded:
    """A message was stored on (or, when transient, made visible on) destinations.

    `placements` lists where it landed: ``(key, seq)`` per queue or topic
    subscription, `key` being ``queue://NAME`` for a queue or the subscription's
    key (``durable://CLIENT:NAME``, ``sub://...``) for a topic subscriber, and
    `seq` that queue's sequence number (the number `Broker.read_messages` and
    the store's `read` page by). A message published to a topic nobody
    subscribes to has no placements, nor has a job the scheduler will deliver
    once, announced when it is sent (its message's `scheduled_delay` is the
    absolute due time; `broker/scheduler.py`)."""

    kind: ClassVar[str] = "message.added"

    message: Message
    destination: Destination
    placements: tuple[tuple[str, int], ...]
    origin: str | None = None

    @property
    def seq(self) -> int:
        """The sequence number of the first placement (a queue's only one); 0 if none."""
        return self.placements[0][1] if self.placements else 0


@dataclass(frozen=True, slots=True)
class MessageRemoved:
    """A message left a queue or topic subscription (`reason`: a `RemovalReason`)."""

    kind: ClassVar[str] = "message.removed"

    message: Message
    destination: Destination
    key: str
    seq: int
    reason: str
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class DestinationCreated:
    """A queue or topic came into existence; `recovered` is True when it was
    restored from the store at start-up rather than created now."""

    kind: ClassVar[str] = "destination.created"

    destination: Destination
    recovered: bool = False
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class DestinationDeleted:
    """A queue or topic was deleted (with everything stored on it)."""

    kind: ClassVar[str] = "destination.deleted"

    destination: Destination
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionCreated:
    """A durable topic subscription was created (`recovered`: restored at start-up)."""

    kind: ClassVar[str] = "subscription.created"

    key: str
    client_id: str
    name: str
    topic: Destination
    selector: str | None = None
    no_local: bool = False
    recovered: bool = False
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionDeleted:
    """A durable topic subscription was removed (unsubscribed, or replaced by one
    with another topic or selector: then a `SubscriptionCreated` follows)."""

    kind: ClassVar[str] = "subscription.deleted"

    key: str
    client_id: str
    name: str
    topic: Destination
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class DestinationConfigured:
    """An address or queue's settings changed at run time (paused, resumed, a
    queue type or limit changed through the management API). `settings` holds
    the new values of what changed, by name."""

    kind: ClassVar[str] = "destination.configured"

    destination: Destination
    settings: Mapping[str, Any] = field(default_factory=dict)
    origin: str | None = None


ChangeEvent = Union[  # noqa: UP007 - a plain union reads best in docs
    MessageAdded, MessageRemoved, DestinationCreated, DestinationDeleted,
    SubscriptionCreated, SubscriptionDeleted, DestinationConfigured,
]

#: every event class, in the order docs/change-feed.md lists them
EVENT_TYPES: tuple[type[Any], ...] = (
    MessageAdded, MessageRemoved, DestinationCreated, DestinationDeleted,
    SubscriptionCreated, SubscriptionDeleted, DestinationConfigured,
)
