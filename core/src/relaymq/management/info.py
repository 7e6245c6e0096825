"""What the management API returns: plain, immutable snapshots.

Nothing here refers back to live broker objects, so a caller (console, CLI, a
plugin) can keep, compare or serialize them (`dataclasses.asdict`) freely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Rates:
    """Messages per second, measured between two looks at a destination (the
    first look gives 0.0; management keeps the previous counters)."""

    enqueue: float = 0.0
    dequeue: float = 0.0


@dataclass(frozen=True, slots=True)
class DestinationInfo:
    """A queue, topic or durable subscription with its statistics (ActiveMQ's JMX names)."""

    key: str  #: `queue://NAME`, `topic://NAME` or `durable://CLIENT:NAME`
    kind: str  #: queue | topic | subscription
    name: str
    depth: int  #: messages not yet acknowledged (in memory or only in the store)
    enqueued: int
    dequeued: int
    dispatched: int
    in_flight: int
    expired: int
    dead_lettered: int
    consumers: int
    producers: int
    memory_used: int  #: bytes of messages held in memory
    store_used: int  #: bytes the store attributes to it (best effort; 0 when unknown)
    rates: Rates = field(default_factory=Rates)
    queue_type: str | None = None  #: queues: the queue type's name
    paused: bool = False
    temporary: bool = False
    duplicates: int = 0  #: sends dropped by duplicate detection (`_AMQ_DUPL_ID` seen before)
    #: messages removed because a newer one superseded them (last value queues)
    replaced: int = 0
    #: messages that expired or used up `maxRedelivery` and went to no dead message
    #: queue (queues with `deadMessageQueue`); also counted in `dead_lettered`
    discarded: int = 0


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    id: str
    client_id: str | None
    user: str | None
    transport: str  #: stomp | amqp | vm | internal ...
    remote_address: str | None
    consumers: int
    producers: int
    network: bool  #: opened by a broker connection (mirror, federation)


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    id: int
    name: str
    connection_id: str | None
    client_id: str | None
    destination: str  #: the key of what it consumes
    selector: str | None
    prefetch: int
    in_flight: int  #: deliveries it holds unacknowledged
    browser: bool
    durable_name: str | None
    exclusive: bool
    priority: int
    #: it receives now (Solace's active flow indication): False for an exclusive
    #: queue's stand-by consumers and a partitioned queue's consumers without a
    #: partition, and while the queue is paused; browsers are active
    active: bool = True
    #: the partitions it owns on a partitioned queue (None elsewhere)
    partitions: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    connection_id: str
    client_id: str | None
    destination: str


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    """A durable topic subscription."""

    key: str  #: `durable://CLIENT:NAME`, also its destination key in this API
    client_id: str
    name: str
    topic: str  #: the topic's key (may be a wildcard)
    selector: str | None
    no_local: bool
    active: bool  #: a consumer is attached
    depth: int


@dataclass(frozen=True, slots=True)
class BrokerConnectionInfo:
    name: str
    kind: str  #: the element that made it (`amqp-connection`) or what registered it
    uri: str | None
    state: str  #: stopped | starting | started | failed (or what the connection reports)
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MessageInfo:
    """One message as browsing shows it."""

    seq: int  #: its sequence number on the destination (the paging cursor)
    message_id: str | None
    destination: str
    durable: bool
    priority: int
    timestamp: int
    expiration: int
    correlation_id: str | None
    type: str | None
    group_id: str | None
    properties: dict[str, Any]
    body: bytes
    delivery_count: int  #: earlier deliveries that did not end in an ack (in memory only)
    in_flight: bool  #: a consumer holds it now
    #: the broker's annotations (where a dead letter came from, why); not its internal
    #: ones (`relaymq.model.message.INTERNAL_ANNOTATIONS`)
    annotations: dict[str, Any] = field(default_factory=dict)
    #: how `body` is meant to be read (`relaymq.model.message.BodyType`)
    body_type: str = "bytes"


@dataclass(frozen=True, slots=True)
class BrowsePage:
    """One page of `Management.browse`; ask for the next with ``after=page.next_after``."""

    messages: list[MessageInfo]
    next_after: int  #: the last sequence number looked at (pass it back as ``after``)
    done: bool  #: nothing follows (as of this page)


@dataclass(frozen=True, slots=True)
class Relocated:
    """What a copy, move or retry of messages did (`Management.copy_messages_report`,
    `move_messages_report`, `retry_messages_report`)."""

    done: int  #: messages that landed where they were sent
    #: copies duplicate detection dropped there (their `_AMQ_DUPL_ID` was seen before);
    #: the original of a moved or retried one stays where it was
    duplicates: int = 0
    #: a retry's messages left where they were because `may_send` refused their
    #: original destination: its key -> how many
    refused: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IncomingBrokerConnectionInfo:
    """A broker connection another broker opened to this one (a mirror's source,
    say): Artemis' ``RemoteBrokerConnectionControl`` with what the receiving
    plugin counts."""

    name: str  #: what the plugin registered it under (a mirror: the source broker's node id)
    kind: str  #: what it is (`mirror`)
    remote_node: str | None  #: the peer broker's node id
    remote_address: str | None  #: host:port of its (last) connection
    connected: bool  #: a link of it is attached now
    detail: dict[str, Any] = field(default_factory=dict)  #: the plugin's `status()`
