"""The YAML form: the same tree as activemq.xml, equal BrokerConfig, errors with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaymq.config import ConfigError, load_config, load_config_text

DATA = Path(__file__).parent / "data"


def test_xml_and_yaml_of_the_same_config_are_equal() -> None:
    props = {"activemq.base": "/srv/relaymq"}
    from_xml = load_config(DATA / "broker.xml", props, env={})
    from_yaml = load_config(DATA / "broker.yaml", props, env={})
    assert from_xml == from_yaml
    # and the comparison is not vacuous:
    assert from_yaml.persistence_adapter.attributes["directory"] == "/srv/relaymq/data/kahadb"
    assert from_yaml.policy_entries[1].dead_letter_strategy.dead_letter_queue == "PRICES.DLQ"
    assert len(from_yaml.destination_interceptors[0].children[0].children) == 2
    assert from_yaml.broker_connections[0].children[0].attributes["queue-creation"] == "true"
    assert from_xml.warnings == from_yaml.warnings == []
    # connectorPort: JMX's RMI port, which has no RelayMQ equivalent
    assert len(from_xml.notes) == len(from_yaml.notes) == 2  # and useJmx


def test_yaml_keeps_line_numbers() -> None:
    config = load_config(DATA / "broker.yaml", env={})
    amqp, stomp = config.transport_connectors
    assert (amqp.origin.line, stomp.origin.line) == (11, 12)
    assert str(config.plugins[1].origin).endswith("broker.yaml:52")
    assert any("broker.yaml:68" in n and "connectorPort" in n for n in config.notes)


def y(text: str, **kw: object) -> object:
    return load_config_text(text, "yaml", filename="broker.yaml", env={}, **kw)  # type: ignore[arg-type]


def test_bad_value_in_yaml_names_the_line() -> None:
    with pytest.raises(ConfigError) as info:
        y("broker:\n  destinationPolicy:\n    policyMap:\n      policyEntries:\n"
          "        - policyEntry: {queue: '>', queuePrefetch: lots}\n")
    assert info.value.errors == [
        '<policyEntry queuePrefetch="lots"> at broker.yaml:5: expected an integer']


def test_empty_elements_and_text() -> None:
    config = y("broker:\n  plugins:\n    - redeliveryPlugin: ~\n    - statisticsBrokerPlugin: {}\n"
               "    - somePlugin: {_text: hello, a: b}\n")
    assert [p.tag for p in config.plugins] == ["redeliveryPlugin", "statisticsBrokerPlugin",
                                               "somePlugin"]
    assert config.plugins[2].text == "hello" and config.plugins[2].attributes == {"a": "b"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the document is empty"),
        ("- broker: {}", "broker.yaml:1: the document must be a mapping with one key"),
        ("broker:\n  destinations:\n    - queue: {physicalName: A}\n      topic: {physicalName: B}\n",
         "broker.yaml:3: each list item must be one element"),
        ("broker:\n  brokerName: a\n  brokerName: b\n", "broker.yaml:3: 'brokerName' appears twice"),
        ("broker:\n  <<: {brokerName: a}\n", "broker.yaml:2: YAML merge keys"),
        ("broker: {brokerName: [unclosed\n", "broker.yaml:2: not valid YAML"),
    ],
)
def test_shape_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        y(text)


def test_format_is_sniffed_without_extension(tmp_path: Path) -> None:
    (tmp_path / "broker.conf").write_text("broker: {brokerName: sniffed}\n")
    assert load_config(tmp_path / "broker.conf", env={}).broker_name == "sniffed"
    (tmp_path / "other.conf").write_text("<broker brokerName='xml'/>")
    assert load_config(tmp_path / "other.conf", env={}).broker_name == "xml"


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read the config file /nonexistent.xml"):
        load_config("/nonexistent.xml")
