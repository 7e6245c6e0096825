"""What the kernel's configuration loader understands, as data.

One list of element names and, per element, the attribute names the loader
reads, derived from the builders' own tables and the model dataclasses so it
cannot drift from them. `core/tests/test_docs.py` fails when any of them is
missing from docs/configuration.md.
"""

from __future__ import annotations

from relaymq.config.broker_builder import BROKER_ATTRIBUTES, BROKER_ELEMENTS, PLUGIN_SLOTS
from relaymq.config.logging_builder import FILE_ATTRIBUTES, LOGGING_ATTRIBUTES
from relaymq.config.model import (
    DeadLetterStrategyConfig,
    PolicyEntryConfig,
    SystemUsageConfig,
    UsageLimit,
)
from relaymq.config.policy_builder import DEAD_LETTER_STRATEGIES, POLICY_ELEMENTS
from relaymq.config.typed import attribute_names
from relaymq.config.usage_builder import USAGE_ELEMENTS, USAGES

_DLQ = [a for a in attribute_names(DeadLetterStrategyConfig) if a != "kind"]
_ONE_DLQ = [a for a in _DLQ if a != "deadLetterQueue"]  # only the shared strategy has one

#: Element -> the attributes the kernel reads from it.
ELEMENT_ATTRIBUTES: dict[str, list[str]] = {
    "broker": list(BROKER_ATTRIBUTES),
    "transportConnector": ["name", "uri"],
    "policyEntry": attribute_names(PolicyEntryConfig),
    "sharedDeadLetterStrategy": _DLQ,
    **{tag: _ONE_DLQ for tag in DEAD_LETTER_STRATEGIES if tag != "sharedDeadLetterStrategy"},
    "systemUsage": attribute_names(SystemUsageConfig),
    **{tag: attribute_names(UsageLimit) for tag in USAGES},
    "logging": list(LOGGING_ATTRIBUTES),
    "logger": ["name", "level"],
    "audit": list(FILE_ATTRIBUTES),
    "queue": ["physicalName", "queueType", "topicSubscriptions"],
    "topic": ["physicalName"],
}

#: Every element name the kernel's loader understands itself.
ELEMENTS: tuple[str, ...] = tuple(dict.fromkeys(
    (*BROKER_ELEMENTS, *POLICY_ELEMENTS, *USAGE_ELEMENTS, *DEAD_LETTER_STRATEGIES,
     *PLUGIN_SLOTS, "persistenceAdapter", "networkConnectors", "configuration", "core")))
