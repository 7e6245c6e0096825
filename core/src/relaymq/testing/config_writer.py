"""A `BrokerConfig` written back as activemq.xml, so a config built in a test runs
in a `relaymq run` child process (`relaymq.testing.broker_proxy`).

    text = config_xml(cfg)            # load_config_text(text) == cfg

It writes what the semantics scenarios configure: the `<broker>` attributes, the
transport connectors, the persistence adapter, the destination policies with their
dead-letter strategies, and the plugin slots (`<plugins>`,
`<destinationInterceptors>`). A field it cannot write raises `ValueError` naming
it, rather than the child silently running another configuration.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from xml.sax.saxutils import quoteattr

from relaymq.config.model import (
    BrokerConfig,
    DeadLetterStrategyConfig,
    PluginElement,
    PolicyEntryConfig,
)
from relaymq.config.typed import ACTIVEMQ_SPELLINGS, snake_to_camel

NAMESPACE = "http://activemq.apache.org/schema/core"

#: `BrokerConfig` fields written as `<broker>` attributes
_BROKER_ATTRIBUTES = {
    "broker_name": "brokerName",
    "data_directory": "dataDirectory",
    "persistent": "persistent",
    "use_jmx": "useJmx",
    "scheduler_support": "schedulerSupport",
    "advisory_support": "advisorySupport",
    "populate_jmsx_user_id": "populateJMSXUserID",
}
#: plugin slots: `BrokerConfig` field -> wrapper element
_SLOTS = {"plugins": "plugins", "destination_interceptors": "destinationInterceptors"}
#: fields written elsewhere, or that say where a config came from
_WRITTEN = {*_BROKER_ATTRIBUTES, *_SLOTS, "transport_connectors", "persistence_adapter",
            "policy_entries", "default_policy", "source", "warnings", "notes", "properties"}
_STRATEGY_ELEMENTS = {"shared": "sharedDeadLetterStrategy",
                      "individual": "individualDeadLetterStrategy",
                      "discarding": "discardingDeadLetterStrategy"}


def config_xml(config: BrokerConfig) -> str:
    """activemq.xml text that loads into a config equal to `config`."""
    unwritable = [f.name for f in dataclasses.fields(BrokerConfig)
                  if f.name not in _WRITTEN and getattr(config, f.name) != _default(f)]
    if unwritable:
        raise ValueError(f"cannot write {', '.join(unwritable)} as activemq.xml (config_writer "
                         "writes the broker attributes, connectors, persistence, policies "
                         "and plugins)")
    attrs = "".join(f" {xml_name}={_attr(getattr(config, field))}"
                    for field, xml_name in _BROKER_ATTRIBUTES.items())
    parts = [f"<broker xmlns={quoteattr(NAMESPACE)}{attrs}>"]
    if config.transport_connectors:
        parts.append("<transportConnectors>")
        for tc in config.transport_connectors:
            name = f" name={_attr(tc.name)}" if tc.name is not None else ""
            parts.append(f"<transportConnector{name} uri={_attr(tc.uri)}/>")
        parts.append("</transportConnectors>")
    if config.persistence_adapter is not None:
        parts.append(f"<persistenceAdapter>{element_xml(config.persistence_adapter)}"
                     "</persistenceAdapter>")
    if config.policy_entries or config.default_policy is not None:
        parts.append("<destinationPolicy><policyMap>")
        if config.policy_entries:
            parts.append("<policyEntries>")
            parts.extend(policy_entry_xml(e) for e in config.policy_entries)
            parts.append("</policyEntries>")
        if config.default_policy is not None:
            parts.append(f"<defaultEntry>{policy_entry_xml(config.default_policy)}</defaultEntry>")
        parts.append("</policyMap></destinationPolicy>")
    for field, wrapper in _SLOTS.items():
        elements: list[PluginElement] = getattr(config, field)
        if elements:
            parts.append(f"<{wrapper}>{''.join(element_xml(e) for e in elements)}</{wrapper}>")
    parts.append("</broker>")
    return "\n".join(parts) + "\n"


def policy_entry_xml(entry: PolicyEntryConfig) -> str:
    if entry.extra:
        raise ValueError(f"cannot write a policy entry's extra attributes {sorted(entry.extra)}")
    attrs = _changed_attributes(entry, skip=("dead_letter_strategy", "extra"))
    strategy = entry.dead_letter_strategy
    if strategy is None:
        return f"<policyEntry{attrs}/>"
    return (f"<policyEntry{attrs}><deadLetterStrategy>{dead_letter_strategy_xml(strategy)}"
            "</deadLetterStrategy></policyEntry>")


def dead_letter_strategy_xml(strategy: DeadLetterStrategyConfig) -> str:
    tag = _STRATEGY_ELEMENTS[strategy.kind]
    return f"<{tag}{_changed_attributes(strategy, skip=('kind',))}/>"


def element_xml(element: PluginElement) -> str:
    """A plugin element as written: its attributes, text and children."""
    attrs = "".join(f" {k}={quoteattr(v)}" for k, v in element.attributes.items())
    inner = _text(element.text) + "".join(element_xml(c) for c in element.children)
    return f"<{element.tag}{attrs}>{inner}</{element.tag}>" if inner else f"<{element.tag}{attrs}/>"


def _changed_attributes(obj: Any, skip: tuple[str, ...]) -> str:
    """` name="value"` for each field that differs from its default."""
    out = []
    for f in dataclasses.fields(obj):
        if f.name in skip or f.name == "origin":
            continue
        value = getattr(obj, f.name)
        if value != _default(f):
            out.append(f" {ACTIVEMQ_SPELLINGS.get(f.name, snake_to_camel(f.name))}={_attr(value)}")
    return "".join(out)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _attr(value: Any) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif value is None:
        raise ValueError("cannot write None as an attribute")
    return quoteattr(str(value))


def _text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
