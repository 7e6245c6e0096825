"""Broker-side redelivery: `<plugins><redeliveryPlugin>` as in ActiveMQ.

```xml
<redeliveryPlugin fallbackToDeadLetter="true" sendToDlqIfMaxRetriesExceeded="true">
  <redeliveryPolicyMap><redeliveryPolicyMap>
    <redeliveryPolicyEntries>
      <redeliveryPolicy queue="REDELIVERY.>" maximumRedeliveries="3"
                        initialRedeliveryDelay="100" redeliveryDelay="200"/>
    </redeliveryPolicyEntries>
    <defaultEntry><redeliveryPolicy maximumRedeliveries="2"/></defaultEntry>
  </redeliveryPolicyMap></redeliveryPolicyMap>
</redeliveryPlugin>
```

A failed delivery (NACK, AMQP `modified` with delivery-failed) is scheduled
again after the policy's delay, until `maximumRedeliveries` is exceeded; then it
is dead-lettered (`sendToDlqIfMaxRetriesExceeded`). An acknowledgement rolled
back with its transaction counts too, and returns at once while it has
redeliveries left (`Queue.return_unacked`); a consumer that leaves holding a
delivery does not count (it may never have reached the application). A destination with no
matching entry and no default is dead-lettered at once when
`fallbackToDeadLetter` is true (the default).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from relaymq.config.model import PluginElement
from relaymq.model.destination import Destination, name_matches


@dataclass(slots=True)
class RedeliveryPolicy:
    maximum_redeliveries: int = 6  # -1: forever
    initial_redelivery_delay: int = 1000  # ms
    redelivery_delay: int = 1000  # ms
    use_exponential_back_off: bool = False
    back_off_multiplier: float = 5.0
    maximum_redelivery_delay: int = -1  # ms; -1: no cap
    queue: str | None = None
    topic: str | None = None

    def delay_for(self, redelivery: int) -> float:
        """Seconds to wait before redelivery number `redelivery` (1-based)."""
        if redelivery <= 1:
            ms = float(self.initial_redelivery_delay)
        else:
            ms = float(self.redelivery_delay or self.initial_redelivery_delay)
            if self.use_exponential_back_off:
                ms = ms * (self.back_off_multiplier ** (redelivery - 1))
        if self.maximum_redelivery_delay >= 0:
            ms = min(ms, float(self.maximum_redelivery_delay))
        return max(ms, 0.0) / 1000.0

    def exceeded(self, redeliveries: int) -> bool:
        return self.maximum_redeliveries >= 0 and redeliveries > self.maximum_redeliveries


#: What a failed delivery gets when no redeliveryPlugin is configured
#: (ActiveMQ's client default: 6 redeliveries, at once).
DEFAULT_FAILED_POLICY = RedeliveryPolicy(initial_redelivery_delay=0, redelivery_delay=0)


@dataclass(slots=True)
class RedeliveryPolicyMap:
    entries: list[RedeliveryPolicy] = field(default_factory=list)
    default: RedeliveryPolicy | None = None
    fallback_to_dead_letter: bool = True
    send_to_dlq_if_max_retries_exceeded: bool = True

    def policy_for(self, destination: Destination) -> RedeliveryPolicy | None:
        for p in self.entries:
            pattern = p.queue if destination.is_queue else p.topic
            if pattern and name_matches(pattern, destination.name):
                return p
        return self.default


_POLICY_ATTRS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "maximumRedeliveries": ("maximum_redeliveries", int),
    "initialRedeliveryDelay": ("initial_redelivery_delay", int),
    "redeliveryDelay": ("redelivery_delay", int),
    "useExponentialBackOff": ("use_exponential_back_off", lambda v: v.strip().lower() == "true"),
    "backOffMultiplier": ("back_off_multiplier", float),
    "maximumRedeliveryDelay": ("maximum_redelivery_delay", int),
    "queue": ("queue", str),
    "topic": ("topic", str),
}


def _policy(element: PluginElement) -> RedeliveryPolicy:
    from relaymq.errors import ConfigError

    p = RedeliveryPolicy()
    for name, raw in element.attributes.items():
        if name not in _POLICY_ATTRS:
            raise ConfigError(
                f"<redeliveryPolicy> at {element.origin} has no attribute '{name}'; "
                f"known: {', '.join(sorted(_POLICY_ATTRS))}"
            )
        attr, conv = _POLICY_ATTRS[name]
        try:
            setattr(p, attr, conv(raw))
        except ValueError as exc:
            raise ConfigError(
                f"<redeliveryPolicy {name}=\"{raw}\"> at {element.origin}: {exc}"
            ) from exc
    if p.redelivery_delay == 1000 and "redeliveryDelay" not in element.attributes:
        p.redelivery_delay = p.initial_redelivery_delay
    return p


def _walk(element: PluginElement, tag: str) -> list[PluginElement]:
    found: list[PluginElement] = []
    for child in element.children:
        if child.tag == tag:
            found.append(child)
        else:
            found.extend(_walk(child, tag))
    return found


class RedeliveryTarget(Protocol):
    """Where the plugin installs its policies (the broker)."""

    redelivery: RedeliveryPolicyMap | None


class RedeliveryPlugin:
    """The `redeliveryPlugin` broker plugin: installs a redelivery policy map."""

    def __init__(self, policy_map: RedeliveryPolicyMap) -> None:
        self.policy_map = policy_map

    @classmethod
    def from_element(cls, element: PluginElement, broker: object = None) -> RedeliveryPlugin:
        def flag(name: str, default: bool) -> bool:
            raw = element.attributes.get(name)
            return default if raw is None else raw.strip().lower() == "true"

        pmap = RedeliveryPolicyMap(
            fallback_to_dead_letter=flag("fallbackToDeadLetter", True),
            send_to_dlq_if_max_retries_exceeded=flag("sendToDlqIfMaxRetriesExceeded", True),
        )
        for default_el in _walk(element, "defaultEntry"):
            for p in default_el.children_named("redeliveryPolicy"):
                pmap.default = _policy(p)
        for entries_el in _walk(element, "redeliveryPolicyEntries"):
            pmap.entries.extend(_policy(p) for p in entries_el.children_named("redeliveryPolicy"))
        return cls(pmap)

    def install(self, broker: RedeliveryTarget) -> None:
        broker.redelivery = self.policy_map
