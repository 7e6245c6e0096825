"""The typed configuration model the loaders (XML, YAML) produce and the broker reads.

Element and attribute names follow ActiveMQ's activemq.xml; attributes become
snake_case fields. Plugin elements (children of `persistenceAdapter`, `plugins`,
`destinationInterceptors`, `broker-connections`) stay generic `PluginElement`s:
their entry point's config class validates them when the plugin is resolved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a config element came from, for error messages (`activemq.xml:14`)."""

    file: str = "<memory>"
    line: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(slots=True)
class PluginElement:
    """An element that names a plugin: its tag is the entry-point name.

    `attributes` are the raw (substituted) attribute strings in camelCase, and
    `children` the nested elements, kept as a tree for the plugin to interpret.
    """

    tag: str
    attributes: dict[str, str] = field(default_factory=dict)
    children: list[PluginElement] = field(default_factory=list)
    text: str = ""
    origin: Origin = field(default_factory=Origin, compare=False)

    def child(self, tag: str) -> PluginElement | None:
        return next((c for c in self.children if c.tag == tag), None)

    def children_named(self, tag: str) -> list[PluginElement]:
        return [c for c in self.children if c.tag == tag]


@dataclass(slots=True)
class TransportConnectorConfig:
    name: str | None
    uri: str
    origin: Origin = field(default_factory=Origin, compare=False)


@dataclass(slots=True)
class DeadLetterStrategyConfig:
    """`sharedDeadLetterStrategy`, `individualDeadLetterStrategy` or `discarding`."""

    kind: str = "shared"  # shared | individual | discarding
    dead_letter_queue: str = "ActiveMQ.DLQ"  # shared only
    queue_prefix: str = "ActiveMQ.DLQ.Queue."
    topic_prefix: str = "ActiveMQ.DLQ.Topic."
    queue_suffix: str = ""
    topic_suffix: str = ""
    use_queue_for_queue_messages: bool = True
    use_queue_for_topic_messages: bool = True
    process_non_persistent: bool = False
    process_expired: bool = True
    expiration: int = 0  # ms a dead-lettered copy lives; 0 = forever


@dataclass(slots=True)
class PolicyEntryConfig:
    """One `policyEntry`: applies to `queue=` or `topic=` (wildcards allowed)."""

    queue: str | None = None
    topic: str | None = None
    #: ActiveMQ's `tempQueue="true"`: the entry of every temporary queue
    temp_queue: bool = False
    queue_prefetch: int | None = None
    topic_prefetch: int | None = None
    durable_topic_prefetch: int | None = None
    queue_browser_prefetch: int | None = None
    prioritized_messages: bool = False
    memory_limit: int | None = None  # bytes
    #: percent of the destination's memory limit its in-memory window may fill
    cursor_memory_high_water_mark: int = 70
    #: bytes of persistent messages a destination keeps in memory ahead of its
    #: consumers; the rest stay in the store and are read as consumers make room
    store_cursor_memory_limit: int = 32 << 20
    producer_flow_control: bool = True
    expire_messages_period: int = 30000  # ms; 0 disables the periodic check
    max_page_size: int = 200
    use_cache: bool = True
    dead_letter_strategy: DeadLetterStrategyConfig | None = None
    send_advisory_if_no_consumers: bool = False
    gc_inactive_destinations: bool = False
    inactive_timout_before_gc: int = 60000
    #: the queue type (entry point of `relaymq.queue_types`) queues matched here are
    #: made with; None means "standard"
    queue_type: str | None = None
    #: duplicate detection (`_AMQ_DUPL_ID`): how many ids per address are kept (Artemis)
    id_cache_size: int = 20000
    #: releases (settled released, or modified without delivery-failed) of one message
    #: before a release counts as a failed delivery; -1: never (the hot release loop guard)
    maximum_releases: int = 10000
    # Solace queue attributes, read by the queue types of relaymq-queue-types
    # (docs/queue-types.md); setting one makes the queue such a type (`effective_queue_type`).
    access_type: str | None = None  # exclusive | non-exclusive
    partition_count: int = 0
    partition_rebalance_delay: int = 5000  # ms
    partition_max_handoff_time: int = 3000  # ms
    dead_message_queue: str | None = None
    max_redelivery: int | None = None
    respect_ttl: bool = True
    dmq_eligible: bool = False
    #: topics (comma-separated, wildcards allowed) whose publications every existing
    #: queue matched here receives (Solace's topic-to-queue mapping)
    topic_subscriptions: str | None = None
    #: ms an anonymous (`queueType="anonymous"`) temporary queue outlives its
    #: connection, waiting for its client id to connect again (Solace: 60 s)
    anonymous_queue_grace: int = 60000
    extra: dict[str, str] = field(default_factory=dict)
    origin: Origin = field(default_factory=Origin, compare=False)

    def effective_queue_type(self) -> str | None:
        """`queueType`, else the Solace type the Solace attributes imply: `partitioned`
        with a partition count, `solace` with any other; None for the standard queue."""
        if self.queue_type:
            return self.queue_type
        if self.partition_count > 0:
            return "partitioned"
        if (self.access_type is not None or self.dead_message_queue is not None
                or self.max_redelivery is not None or not self.respect_ttl or self.dmq_eligible
                or self.topic_subscriptions):
            return "solace"
        return None


@dataclass(slots=True)
class UsageLimit:
    limit: int | None = None  # bytes
    percent_of_jvm_heap: int | None = None  # read as a percentage of machine memory


@dataclass(slots=True)
class SystemUsageConfig:
    memory: UsageLimit = field(default_factory=lambda: UsageLimit(limit=1 << 30))
    store: UsageLimit = field(default_factory=lambda: UsageLimit(limit=100 << 30))
    temp: UsageLimit = field(default_factory=lambda: UsageLimit(limit=50 << 30))
    send_fail_if_no_space: bool = False
    send_fail_if_no_space_after_timeout: int = 0  # ms; 0 = wait forever


@dataclass(slots=True)
class DestinationDecl:
    """A destination created at start-up (`<destinations><queue physicalName=..>`)."""

    kind: str  # queue | topic
    physical_name: str
    origin: Origin = field(default_factory=Origin, compare=False)
    #: `<queue queueType="NAME">`: the queue type, over what the policy says
    queue_type: str | None = None
    #: `<queue topicSubscriptions="A,B.>">`: topics whose publications the queue receives
    topic_subscriptions: str | None = None


@dataclass(slots=True)
class LogFileConfig:
    """Where a log goes: a rotating file (log4j's RollingFileAppender names) and its format."""

    file: str | None = None
    max_file_size: int = field(default=50 << 20, metadata={"unit": "bytes"})
    max_backup_index: int = 5
    format: str = "text"  # text | json (one JSON object per line)


@dataclass(slots=True)
class LoggingConfig:
    """`<logging>`: the root level, per-logger levels, file output, the audit log."""

    level: str = "INFO"
    console: bool = True
    output: LogFileConfig = field(default_factory=LogFileConfig)
    loggers: dict[str, str] = field(default_factory=dict)
    audit: LogFileConfig | None = None
    origin: Origin = field(default_factory=Origin, compare=False)


@dataclass(slots=True)
class BrokerConfig:
    broker_name: str = "localhost"
    data_directory: str = "data"
    persistent: bool = True
    scheduler_support: bool = False
    use_jmx: bool = False
    advisory_support: bool = True
    #: stamp each sent message's JMSXUserID (AMQP user-id) with the sender's user
    populate_jmsx_user_id: bool = False
    transport_connectors: list[TransportConnectorConfig] = field(default_factory=list)
    persistence_adapter: PluginElement | None = None
    policy_entries: list[PolicyEntryConfig] = field(default_factory=list)
    default_policy: PolicyEntryConfig | None = None
    destination_interceptors: list[PluginElement] = field(default_factory=list)
    plugins: list[PluginElement] = field(default_factory=list)
    broker_connections: list[PluginElement] = field(default_factory=list)
    #: `<bridges>` (JMS-style bridges) and ActiveMQ's `<jmsBridgeConnectors>`
    bridges: list[PluginElement] = field(default_factory=list)
    jms_bridge_connectors: list[PluginElement] = field(default_factory=list)
    system_usage: SystemUsageConfig = field(default_factory=SystemUsageConfig)
    destinations: list[DestinationDecl] = field(default_factory=list)
    network_connectors: list[PluginElement] = field(default_factory=list)
    logging: LoggingConfig | None = None
    properties: dict[str, str] = field(default_factory=dict)
    # Where the config came from and what loading it said: metadata, so two
    # configs that configure the same broker compare equal (XML vs YAML).
    source: str = field(default="<defaults>", compare=False)
    warnings: list[str] = field(default_factory=list, compare=False)
    extra: dict[str, Any] = field(default_factory=dict)
    #: informational notes from loading (e.g. "useJmx is accepted and ignored")
    notes: list[str] = field(default_factory=list, compare=False)

    def queue_type_uses(self) -> list[tuple[str, Origin]]:
        """(queue type name, where it is named) for every `queueType` in this config."""
        entries = [*self.policy_entries,
                   *([self.default_policy] if self.default_policy is not None else [])]
        uses = [(name, e.origin) for e in entries if (name := e.effective_queue_type())]
        uses += [(d.queue_type, d.origin) for d in self.destinations if d.queue_type]
        return uses
