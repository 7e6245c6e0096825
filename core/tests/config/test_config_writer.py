"""`relaymq.testing.config_writer`: a BrokerConfig written as activemq.xml loads back equal."""

from __future__ import annotations

import dataclasses

import pytest
from relaymq.config.loader import load_config_text
from relaymq.config.model import (
    BrokerConfig,
    DeadLetterStrategyConfig,
    PluginElement,
    PolicyEntryConfig,
    SystemUsageConfig,
    TransportConnectorConfig,
    UsageLimit,
)
from relaymq.testing.config_writer import config_xml

_ABOUT_THE_SOURCE = ("source", "warnings", "notes", "properties")


def _loaded(cfg: BrokerConfig) -> BrokerConfig:
    back = load_config_text(config_xml(cfg), strict=True)
    return back


def _same(a: BrokerConfig, b: BrokerConfig) -> None:
    for f in dataclasses.fields(BrokerConfig):
        if f.name not in _ABOUT_THE_SOURCE:
            assert getattr(a, f.name) == getattr(b, f.name), f.name


def test_broker_attributes_connectors_and_persistence_round_trip() -> None:
    cfg = BrokerConfig(broker_name="b1", persistent=True, scheduler_support=True,
                       advisory_support=False,
                       transport_connectors=[TransportConnectorConfig("stomp", "stomp://127.0.0.1:61613"),
                                             TransportConnectorConfig(None, "amqp://127.0.0.1:5672?x=1&y=2")],
                       persistence_adapter=PluginElement("sqlite", {"path": "/tmp/a <b>.db"}))
    _same(_loaded(cfg), cfg)


def test_policies_with_every_dead_letter_strategy_round_trip() -> None:
    cfg = BrokerConfig(persistent=False, policy_entries=[
        PolicyEntryConfig(queue=">", queue_prefetch=2, prioritized_messages=True,
                          expire_messages_period=50, id_cache_size=3, memory_limit=5000,
                          inactive_timout_before_gc=10,
                          dead_letter_strategy=DeadLetterStrategyConfig(
                              kind="individual", queue_prefix="DLQ.", process_expired=False)),
        PolicyEntryConfig(topic="NEWS.>", dead_letter_strategy=DeadLetterStrategyConfig(
            kind="shared", dead_letter_queue="MY.DLQ", process_non_persistent=True)),
        PolicyEntryConfig(queue="TMP.>", dead_letter_strategy=DeadLetterStrategyConfig(kind="discarding")),
    ], default_policy=PolicyEntryConfig(expire_messages_period=75))
    back = _loaded(cfg)
    _same(back, cfg)
    assert back.policy_entries[0].dead_letter_strategy.queue_prefix == "DLQ."  # type: ignore[union-attr]


def test_plugin_elements_round_trip() -> None:
    inner = PluginElement("redeliveryPolicy", {"queue": "R.>", "maximumRedeliveries": "2"})
    cfg = BrokerConfig(persistent=False, plugins=[PluginElement(
        "redeliveryPlugin", {"fallbackToDeadLetter": "true"},
        [PluginElement("redeliveryPolicyMap", {}, [PluginElement("redeliveryPolicyEntries", {}, [inner])])])])
    back = _loaded(cfg)
    assert back.plugins == cfg.plugins


def test_a_field_it_cannot_write_is_refused_by_name() -> None:
    cfg = BrokerConfig(persistent=False, system_usage=SystemUsageConfig(memory=UsageLimit(limit=1000)))
    with pytest.raises(ValueError, match="system_usage"):
        config_xml(cfg)
