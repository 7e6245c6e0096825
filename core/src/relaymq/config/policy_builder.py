"""`<destinationPolicy>` -> `PolicyEntryConfig`s (and the default entry).

```xml
<destinationPolicy><policyMap>
  <policyEntries>
    <policyEntry queue=">" queuePrefetch="100" memoryLimit="64 mb">
      <deadLetterStrategy>
        <individualDeadLetterStrategy queuePrefix="DLQ." processExpired="false"/>
      </deadLetterStrategy>
    </policyEntry>
  </policyEntries>
  <defaultEntry><policyEntry producerFlowControl="false"/></defaultEntry>
</policyMap></destinationPolicy>
```

Only the data model lives here; what the entries mean is the dispatcher's business.
ActiveMQ policy children RelayMQ does not implement (``pendingQueuePolicy``,
``subscriptionRecoveryPolicy``, ...) are warned about one by one.
"""

from __future__ import annotations

from relaymq.config.context import BuildContext
from relaymq.config.model import BrokerConfig, DeadLetterStrategyConfig, PolicyEntryConfig
from relaymq.config.report import at
from relaymq.config.tree import Node

#: Child element of `<deadLetterStrategy>` -> `DeadLetterStrategyConfig.kind`.
DEAD_LETTER_STRATEGIES = {
    "sharedDeadLetterStrategy": "shared",
    "individualDeadLetterStrategy": "individual",
    "discarding": "discarding",
    "discardingDeadLetterStrategy": "discarding",
}

#: Elements of the destinationPolicy tree the kernel reads (for docs and tests).
POLICY_ELEMENTS = (
    "destinationPolicy", "policyMap", "policyEntries", "policyEntry", "defaultEntry",
    "deadLetterStrategy", "sharedDeadLetterStrategy", "individualDeadLetterStrategy",
    "discarding", "deadLetterQueue",
)


def destination_policy(ctx: BuildContext, node: Node, config: BrokerConfig) -> None:
    policy_map = ctx.single_child(node, "policyMap")
    if policy_map is None:
        return
    for name in policy_map.attributes:
        ctx.unknown_attribute(name, policy_map)
    for child in policy_map.children:
        if child.foreign:
            ctx.ignore_foreign(child, policy_map)
        elif child.tag == "policyEntries":
            for entry in child.children:
                if entry.foreign:
                    ctx.ignore_foreign(entry, child)
                elif entry.tag != "policyEntry":
                    ctx.unknown_element(entry, child, ["policyEntry"])
                elif (built := policy_entry(ctx, entry, default=False)) is not None:
                    config.policy_entries.append(built)
        elif child.tag == "defaultEntry":
            entry_node = ctx.single_child(child, "policyEntry")
            if entry_node is not None:
                config.default_policy = policy_entry(ctx, entry_node, default=True)
        else:
            ctx.unknown_element(child, policy_map, ["policyEntries", "defaultEntry"])


def policy_entry(ctx: BuildContext, node: Node, *, default: bool) -> PolicyEntryConfig | None:
    entry = ctx.typed(PolicyEntryConfig, node, ignore=("deadLetterStrategy",))
    if entry is None:
        return None
    if not default and not (entry.queue or entry.topic or "tempQueue" in node.attributes
                            or "tempTopic" in node.attributes):
        ctx.report.error(
            f"<policyEntry>{at(node.origin)} names no destination; add queue=\">\" or "
            "topic=\">\" (wildcards allowed), or move it into <defaultEntry>"
        )
        return None
    for child in node.children:
        if child.tag == "deadLetterStrategy" and not child.foreign:
            entry.dead_letter_strategy = dead_letter_strategy(ctx, child)
    _check_queue_type_attributes(ctx, node, entry)
    return entry


def _check_queue_type_attributes(ctx: BuildContext, node: Node, entry: PolicyEntryConfig) -> None:
    """The Solace queue attributes (docs/queue-types.md): errors found when the
    configuration loads (`relaymq config check`), not when a client first uses the
    queue. `accessType` is Solace's `exclusive` or `non-exclusive`, in any case."""
    where = f"<policyEntry>{at(node.origin)}"
    if entry.access_type is not None:
        kind = entry.access_type.strip().lower()
        if kind not in ("exclusive", "non-exclusive"):
            ctx.report.error(f'{where}: accessType="{entry.access_type}": use exclusive or '
                             "non-exclusive")
        entry.access_type = kind
    for name, value in (("partitionCount", entry.partition_count),
                        ("partitionRebalanceDelay", entry.partition_rebalance_delay),
                        ("partitionMaxHandoffTime", entry.partition_max_handoff_time),
                        ("anonymousQueueGrace", entry.anonymous_queue_grace)):
        if value < 0:
            ctx.report.error(f'{where}: {name}="{value}" must be 0 or more')
    if entry.dead_message_queue and entry.dead_letter_strategy is not None:
        ctx.report.error(f"{where} sets both deadMessageQueue and a deadLetterStrategy; one "
                         "of them applies to a queue")


def dead_letter_strategy(ctx: BuildContext, node: Node) -> DeadLetterStrategyConfig | None:
    strategy = ctx.single_child(node)
    if strategy is None:
        return None
    kind = DEAD_LETTER_STRATEGIES.get(strategy.tag)
    if kind is None:
        ctx.unknown_element(strategy, node, list(DEAD_LETTER_STRATEGIES))
        return None
    config = ctx.typed(DeadLetterStrategyConfig, strategy, ignore=("deadLetterQueue", "kind"))
    if config is None:
        return None
    config.kind = kind
    if "kind" in strategy.attributes:
        ctx.unknown_attribute("kind", strategy, reason="the element name sets the kind")
    for child in strategy.children:
        if child.tag != "deadLetterQueue" or child.foreign:
            continue
        if kind != "shared":
            ctx.unknown_element(child, strategy, reason="only sharedDeadLetterStrategy has a "
                                                        "single dead-letter queue")
            continue
        queue = ctx.single_child(child)
        if queue is None:
            continue
        name = ctx.attrs(queue).get("physicalName")
        if queue.tag != "queue" or not name:
            ctx.report.error(
                f"<deadLetterQueue>{at(child.origin)} needs <queue physicalName=\"...\"/>; "
                f"found <{queue.tag}>"
            )
            continue
        config.dead_letter_queue = name
    if kind != "shared" and "deadLetterQueue" in strategy.attributes:
        ctx.unknown_attribute("deadLetterQueue", strategy,
                              reason="only sharedDeadLetterStrategy has a single dead-letter queue")
    elif "deadLetterQueue" in strategy.attributes:
        value = ctx.attrs(strategy).get("deadLetterQueue")
        if value:
            config.dead_letter_queue = value
    return config
