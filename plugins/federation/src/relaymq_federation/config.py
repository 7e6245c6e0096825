"""The ``<federation>`` element: address and queue policies (Artemis' names).

```xml
<federation>
  <local-address-policy name="news" max-hops="2" auto-delete="true">
    <include address-match="news.#"/> <exclude address-match="news.internal.#"/>
  </local-address-policy>
  <local-queue-policy name="work" priority-adjustment="-1" include-federated="false">
    <include address-match="#" queue-match="work.*"/>
  </local-queue-policy>
  <remote-address-policy .../> <remote-queue-policy .../>
  <property key="addressReceiverIdleTimeout" value="5000"/>
</federation>
```

The same tree in YAML (see docs/configuration.md) gives the same model. A
policy also travels as a map on the control link (`to_map` / `from_map`, the
keys of Artemis' ``AMQPFederationPolicySupport``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from relaymq.config.model import PluginElement
from relaymq.config.report import Report
from relaymq.errors import ConfigError

from relaymq_federation.matching import Matcher, matches

log = logging.getLogger("relaymq.federation")

#: Artemis' defaults (AMQPFederationConfiguration)
DEFAULTS: dict[str, Any] = {
    "amqpCredits": 1000,
    "amqpLowCredits": 300,
    "receiverQuiesceTimeout": 60000,
    "addressReceiverIdleTimeout": 5000,
    "queueReceiverIdleTimeout": 60000,
    "amqpPullConsumerCredits": 100,
    "attach-timeout": 30,
    "ignoreAddressBindingFilters": True,
    "ignoreQueueConsumerFilters": False,
    "ignoreQueueConsumerPriorities": True,
}


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ConfigError(f"{where}: {value!r} is not a boolean")


def _int(value: Any, where: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{where}: {value!r} is not a whole number") from None


@dataclass
class AddressPolicy:
    """``<local-address-policy>`` / ``<remote-address-policy>``."""

    name: str
    includes: list[str] = field(default_factory=list)
    excludes: list[str] = field(default_factory=list)
    #: 0: no limit (Artemis' default)
    max_hops: int = 0
    auto_delete: bool = False
    auto_delete_delay: int = 0
    auto_delete_message_count: int = 0
    enable_divert_bindings: bool = False
    properties: dict[str, str] = field(default_factory=dict)

    def selects(self, address: str) -> bool:
        return Matcher(self.includes, self.excludes)(address)

    def to_map(self) -> dict[str, Any]:
        from relaymq_amqp.types import Long

        return {
            "policy-name": self.name, "auto-delete": self.auto_delete,
            "auto-delete-delay": Long(self.auto_delete_delay),
            "auto-delete-msg-count": Long(self.auto_delete_message_count),
            "max-hops": self.max_hops, "enable-divert-bindings": self.enable_divert_bindings,
            "address-includes": list(self.includes), "address-excludes": list(self.excludes),
            "policy-properties-map": dict(self.properties),
        }

    @classmethod
    def from_map(cls, m: Any) -> AddressPolicy:
        """A policy sent by the peer; `ValueError` names what is wrong."""
        if not isinstance(m, dict):
            raise ValueError("an address policy must be a map")
        name = m.get("policy-name")
        if not isinstance(name, str) or not name:
            raise ValueError("the address policy has no 'policy-name'")
        if "max-hops" not in m or not isinstance(m["max-hops"], int):
            raise ValueError(f"address policy {name!r} has no 'max-hops'")
        return cls(name, [str(x) for x in m.get("address-includes") or []],
                   [str(x) for x in m.get("address-excludes") or []], int(m["max-hops"]),
                   bool(m.get("auto-delete", False)), int(m.get("auto-delete-delay") or 0),
                   int(m.get("auto-delete-msg-count") or 0),
                   bool(m.get("enable-divert-bindings", False)),
                   {str(k): str(v) for k, v in (m.get("policy-properties-map") or {}).items()})


@dataclass
class QueuePolicy:
    """``<local-queue-policy>`` / ``<remote-queue-policy>``."""

    name: str
    #: (address-match, queue-match) pairs
    includes: list[tuple[str, str]] = field(default_factory=list)
    excludes: list[tuple[str, str]] = field(default_factory=list)
    priority_adjustment: int = -1
    include_federated: bool = False
    properties: dict[str, str] = field(default_factory=dict)

    def selects(self, address: str, queue: str) -> bool:
        def hit(pairs: list[tuple[str, str]]) -> bool:
            return any(matches(a, address) and matches(q, queue) for a, q in pairs)

        return hit(self.includes) and not hit(self.excludes)

    def to_map(self) -> dict[str, Any]:
        def flat(pairs: list[tuple[str, str]]) -> list[str]:
            return [x for pair in pairs for x in pair]

        return {
            "policy-name": self.name, "include-federated": self.include_federated,
            "priority-adjustment": self.priority_adjustment,
            "queue-includes": flat(self.includes), "queue-excludes": flat(self.excludes),
            "policy-properties-map": dict(self.properties),
        }

    @classmethod
    def from_map(cls, m: Any) -> QueuePolicy:
        if not isinstance(m, dict):
            raise ValueError("a queue policy must be a map")
        name = m.get("policy-name")
        if not isinstance(name, str) or not name:
            raise ValueError("the queue policy has no 'policy-name'")

        def pairs(key: str) -> list[tuple[str, str]]:
            flat = [str(x) for x in m.get(key) or []]
            if len(flat) % 2:
                raise ValueError(f"queue policy {name!r}: '{key}' must hold address/queue pairs")
            return list(zip(flat[0::2], flat[1::2], strict=True))

        return cls(name, pairs("queue-includes"), pairs("queue-excludes"),
                   int(m.get("priority-adjustment", -1)), bool(m.get("include-federated", False)),
                   {str(k): str(v) for k, v in (m.get("policy-properties-map") or {}).items()})


@dataclass
class FederationConfig:
    """One ``<federation>``: its policies and settings."""

    name: str = ""
    local_address_policies: list[AddressPolicy] = field(default_factory=list)
    local_queue_policies: list[QueuePolicy] = field(default_factory=list)
    remote_address_policies: list[AddressPolicy] = field(default_factory=list)
    remote_queue_policies: list[QueuePolicy] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=lambda: dict(DEFAULTS))

    def setting(self, key: str) -> Any:
        return self.properties.get(key, DEFAULTS.get(key))

    def to_configuration_map(self) -> dict[str, Any]:
        """``federation-configuration``: what the control link tells the peer,
        typed as Artemis sends it (numbers and booleans, Artemis' defaults for
        what is not set); RelayMQ never tunnels core messages."""
        out: dict[str, Any] = {}
        for key, value in {**DEFAULTS, **self.properties}.items():
            default = DEFAULTS.get(key)
            try:
                if isinstance(default, bool):
                    value = _bool(value, key)
                elif isinstance(default, int):
                    value = int(str(value).strip())
            except (ConfigError, ValueError):
                pass  # sent as given; the peer judges it
            out[key] = value
        out["tunnel-core-messages"] = False
        return out


def _where(el: PluginElement) -> str:
    return f"<{el.tag}> ({el.origin})"


def _warn(message: str, report: Report | None) -> None:
    """A problem the federation steps around: logged, or (`relaymq config check`,
    `run` before it starts anything) a warning of `report`, an error under --strict."""
    if report is not None:
        report.warn(message)
    else:
        log.warning("%s", message)


def _attrs(el: PluginElement, known: set[str], report: Report | None) -> dict[str, str]:
    unknown = set(el.attributes) - known
    if unknown:
        _warn(f"{_where(el)}: attribute(s) {', '.join(sorted(unknown))} not understood; ignored",
              report)
    return el.attributes


#: tags of a ``<federation>`` tree; any other child without attributes only
#: groups its children (YAML cannot repeat a key, so it writes repeated
#: ``include``, ``property`` or policy elements as a list under a group key)
_KNOWN = {"include", "exclude", "property", "local-address-policy", "remote-address-policy",
          "local-queue-policy", "remote-queue-policy"}


def _children(el: PluginElement, tag: str | None = None) -> list[PluginElement]:
    out: list[PluginElement] = []
    for child in el.children:
        if child.tag not in _KNOWN and not child.attributes and child.children:
            out.extend(_children(child))
        elif tag is None or child.tag == tag:
            out.append(child)
    return [c for c in out if tag is None or c.tag == tag]


def _properties(el: PluginElement) -> dict[str, str]:
    out = {}
    for p in _children(el, "property"):
        key = p.attributes.get("key")
        if not key:
            raise ConfigError(f"{_where(p)}: <property> needs a key")
        out[key] = p.attributes.get("value", "")
    return out


def _name(el: PluginElement) -> str:
    name = el.attributes.get("name")
    if not name:
        raise ConfigError(f"{_where(el)}: a policy needs a name")
    return name


def address_policy(el: PluginElement, report: Report | None = None) -> AddressPolicy:
    w = _where(el)
    a = _attrs(el, {"name", "max-hops", "auto-delete", "auto-delete-delay",
                    "auto-delete-message-count", "enable-divert-bindings", "transformer-class-name"}, report)
    includes = [i.attributes.get("address-match", "") for i in _children(el, "include")]
    excludes = [i.attributes.get("address-match", "") for i in _children(el, "exclude")]
    if any(not x for x in includes + excludes):
        raise ConfigError(f"{w}: <include>/<exclude> needs address-match")
    policy = AddressPolicy(_name(el), includes, excludes,
                           _int(a.get("max-hops", "0"), w + " max-hops"),
                           _bool(a.get("auto-delete", "false"), w + " auto-delete"),
                           _int(a.get("auto-delete-delay", "0"), w + " auto-delete-delay"),
                           _int(a.get("auto-delete-message-count", "0"),
                                w + " auto-delete-message-count"),
                           _bool(a.get("enable-divert-bindings", "false"), w), _properties(el))
    if policy.max_hops < 0:
        raise ConfigError(f"{w}: max-hops must be 0 (no limit) or more")
    if not includes:
        _warn(f"{w}: no <include>: the policy selects no address", report)
    return policy


def queue_policy(el: PluginElement, report: Report | None = None) -> QueuePolicy:
    w = _where(el)
    a = _attrs(el, {"name", "priority-adjustment", "include-federated", "transformer-class-name"},
               report)

    def pairs(tag: str) -> list[tuple[str, str]]:
        out = []
        for i in _children(el, tag):
            out.append((i.attributes.get("address-match", "#"), i.attributes.get("queue-match", "#")))
        return out

    return QueuePolicy(_name(el), pairs("include"), pairs("exclude"),
                       _int(a.get("priority-adjustment", "-1"), w + " priority-adjustment"),
                       _bool(a.get("include-federated", "false"), w + " include-federated"),
                       _properties(el))


def federation_config(el: PluginElement, connection_name: str,
                      report: Report | None = None) -> FederationConfig:
    """`<federation>` converted; a wrong value raises `ConfigError` naming the element
    and where it is, an attribute not understood is logged (or goes to `report`)."""
    _attrs(el, {"name"}, report)
    cfg = FederationConfig(name=el.attributes.get("name") or connection_name)
    for key, value in _properties(el).items():
        default = DEFAULTS.get(key)
        if isinstance(default, bool):
            cfg.properties[key] = _bool(value, f"{_where(el)} property {key}")
        elif isinstance(default, int):
            cfg.properties[key] = _int(value, f"{_where(el)} property {key}")
        else:
            cfg.properties[key] = value
    builders = {"local-address-policy": (address_policy, cfg.local_address_policies),
                "remote-address-policy": (address_policy, cfg.remote_address_policies),
                "local-queue-policy": (queue_policy, cfg.local_queue_policies),
                "remote-queue-policy": (queue_policy, cfg.remote_queue_policies)}
    for child in _children(el):
        if child.tag == "property":
            continue
        entry = builders.get(child.tag)
        if entry is None:
            raise ConfigError(f"{_where(child)}: not a federation element (expected "
                              f"{', '.join(builders)} or property)")
        build, target = entry
        target.append(build(child, report))  # type: ignore[attr-defined,operator]
    return cfg
