"""`<systemUsage>` -> `SystemUsageConfig` (memory, store and temp limits).

ActiveMQ nests each usage twice (the property element, then the bean):

```xml
<systemUsage><systemUsage sendFailIfNoSpace="true">
  <memoryUsage><memoryUsage percentOfJvmHeap="70"/></memoryUsage>
  <storeUsage><storeUsage limit="100 gb"/></storeUsage>
  <tempUsage><tempUsage limit="50 gb"/></tempUsage>
</systemUsage></systemUsage>
```

`percentOfJvmHeap` is kept as written; the broker reads it as a percentage of the
machine's memory, since there is no JVM heap.
"""

from __future__ import annotations

import dataclasses

from relaymq.config.context import BuildContext
from relaymq.config.model import BrokerConfig, SystemUsageConfig, UsageLimit
from relaymq.config.tree import Node

#: `<systemUsage>` child -> `SystemUsageConfig` field.
USAGES = {"memoryUsage": "memory", "storeUsage": "store", "tempUsage": "temp"}
USAGE_ELEMENTS = ("systemUsage", *USAGES)


def system_usage(ctx: BuildContext, node: Node, config: BrokerConfig) -> None:
    inner = ctx.single_child(node, "systemUsage")
    if inner is None:
        return
    usage = ctx.typed(SystemUsageConfig, inner, ignore=tuple(USAGES))
    if usage is None:
        return
    for child in inner.children:
        field_name = USAGES.get(child.tag)
        if field_name is None or child.foreign:
            continue  # already warned about by convert / single_child
        limit_node = ctx.single_child(child, child.tag)
        if limit_node is None:
            continue
        limit = ctx.typed(UsageLimit, limit_node)
        if limit is None:
            continue
        current: UsageLimit = getattr(usage, field_name)
        if limit.percent_of_jvm_heap is not None and "limit" not in limit_node.attributes:
            current = dataclasses.replace(current, limit=None,
                                          percent_of_jvm_heap=limit.percent_of_jvm_heap)
        else:
            current = dataclasses.replace(
                current,
                limit=limit.limit if "limit" in limit_node.attributes else current.limit,
                percent_of_jvm_heap=limit.percent_of_jvm_heap,
            )
        setattr(usage, field_name, current)
    config.system_usage = usage
