"""activemq.xml loading: the realistic ActiveMQ file, namespaces, errors with file:line, strict."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaymq.config import ConfigError, load_config, load_config_text
from relaymq.config.model import PluginElement

DATA = Path(__file__).parent / "data"
ACTIVEMQ_XML = DATA / "activemq-5.17.xml"


def xml(body: str, **kw: object) -> object:
    return load_config_text(body, "xml", filename="activemq.xml", env={}, **kw)  # type: ignore[arg-type]


def errors_of(body: str, **kw: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        xml(body, **kw)
    return info.value.errors


# ---------------------------------------------------------------------------
# A real ActiveMQ 5.17 activemq.xml
# ---------------------------------------------------------------------------


@pytest.fixture
def stock() -> object:
    return load_config(ACTIVEMQ_XML, {"activemq.base": "/opt/activemq"}, env={})


def test_realistic_activemq_xml_loads_with_warnings_naming_each_unknown_part(stock) -> None:
    warnings = "\n".join(stock.warnings)
    where = str(ACTIVEMQ_XML)
    for expected in (
        f'<bean class="io.fabric8.insight.log.log4j.Log4jLogQuery"> at {where}:20',
        f'<import resource="jetty.xml"> at {where}:139',
        f"<shutdownHooks> at {where}:129",
        f"<broker> at {where}:25: attribute 'schedulePeriodForDestinationPurge'",
        f"<pendingMessageLimitStrategy> at {where}:33 inside <policyEntry>",
        f"<policyEntry> at {where}:37: attribute 'optimizedDispatch'",
        f"<pendingQueuePolicy> at {where}:44 inside <policyEntry>",
        "credentials.properties",
    ):
        assert expected in warnings
    assert len(stock.warnings) == 8, stock.warnings
    # createConnector="false" (no JMX connector) is what RelayMQ does anyway: no warning
    assert not any("managementContext" in w for w in stock.warnings)
    assert any("useJmx" in n for n in stock.notes)


def test_realistic_activemq_xml_typed_values(stock) -> None:
    assert stock.broker_name == "localhost"
    assert stock.data_directory == "/opt/activemq/data"
    assert stock.use_jmx is True and stock.scheduler_support is True
    schemes = [tc.uri.split(":")[0] for tc in stock.transport_connectors]
    assert schemes == ["tcp", "amqp", "stomp", "mqtt", "ws"]
    assert stock.transport_connectors[1].uri.endswith("wireFormat.maxFrameSize=104857600")
    assert stock.transport_connectors[1].origin.line == 122

    kahadb = stock.persistence_adapter
    assert kahadb.tag == "kahaDB"
    assert kahadb.attributes == {"directory": "/opt/activemq/data/kahadb",
                                 "journalMaxFileLength": "32mb"}
    assert kahadb.origin.line == 81

    topic_all, queue_all, orders = stock.policy_entries
    assert topic_all.topic == ">" and topic_all.dead_letter_strategy is None
    assert queue_all.queue_prefetch == 500
    assert queue_all.memory_limit == 64 << 20
    assert queue_all.gc_inactive_destinations is True
    assert queue_all.inactive_timout_before_gc == 30000
    assert queue_all.extra == {"optimizedDispatch": "true"}
    dls = queue_all.dead_letter_strategy
    assert (dls.kind, dls.queue_prefix, dls.process_expired, dls.process_non_persistent) == (
        "individual", "DLQ.", False, True)
    assert orders.prioritized_messages is True and orders.max_page_size == 500
    assert orders.dead_letter_strategy.kind == "shared"
    assert orders.dead_letter_strategy.dead_letter_queue == "ORDERS.DLQ"
    assert stock.default_policy.expire_messages_period == 60000
    assert stock.default_policy.dead_letter_strategy.kind == "discarding"

    usage = stock.system_usage
    assert usage.memory.percent_of_jvm_heap == 70 and usage.memory.limit is None
    assert usage.store.limit == 100 << 30
    assert usage.temp.limit == 50 << 30
    assert usage.send_fail_if_no_space_after_timeout == 3000

    assert [(d.kind, d.physical_name) for d in stock.destinations] == [
        ("queue", "ORDERS.IN"), ("topic", "PRICES")]
    (vdi,) = stock.destination_interceptors
    assert vdi.tag == "virtualDestinationInterceptor"
    assert vdi.children[0].children[0].attributes["prefix"] == "Consumer.*."


def test_plugin_subtree_is_kept_whole(stock) -> None:
    (redelivery,) = stock.plugins
    assert redelivery.tag == "redeliveryPlugin"
    outer = redelivery.child("redeliveryPolicyMap")
    inner = outer.child("redeliveryPolicyMap")
    entries = inner.child("redeliveryPolicyEntries").children_named("redeliveryPolicy")
    assert entries[0].attributes["maximumRedeliveries"] == "3"
    assert inner.child("defaultEntry").child("redeliveryPolicy").attributes == {
        "maximumRedeliveries": "6", "initialRedeliveryDelay": "500"}
    assert entries[0].origin.line == 89


def test_realistic_file_under_strict_lists_every_warning_as_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(ACTIVEMQ_XML, {"activemq.base": "/opt/activemq"}, strict=True, env={})
    assert len(info.value.errors) == 8
    assert all("--strict" in e for e in info.value.errors)


# ---------------------------------------------------------------------------
# Shapes: bare broker, namespaces, Artemis
# ---------------------------------------------------------------------------


def test_bare_broker_without_namespace() -> None:
    config = xml('<broker brokerName="b1" persistent="false" advisorySupport="false"/>')
    assert (config.broker_name, config.persistent, config.advisory_support) == ("b1", False, False)
    assert config.warnings == []


def test_bare_broker_in_activemq_namespace() -> None:
    config = xml('<broker xmlns="http://activemq.apache.org/schema/core" brokerName="b2">'
                 '<destinations><queue physicalName="Q"/></destinations></broker>')
    assert config.broker_name == "b2"
    assert config.destinations[0].physical_name == "Q"


def test_beans_wrapper_without_broker_is_an_error() -> None:
    (error,) = errors_of('<beans xmlns="http://www.springframework.org/schema/beans"/>')
    assert "activemq.xml:1" in error and "no <broker>" in error


def test_other_root_is_an_error() -> None:
    with pytest.raises(ConfigError, match="root element is <queue>"):
        xml("<queue/>")


def test_artemis_broker_connections() -> None:
    config = xml(
        """<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <name>artemis-a</name>
    <persistence-enabled>false</persistence-enabled>
    <acceptors><acceptor name="amqp">tcp://0.0.0.0:5672?protocols=AMQP</acceptor></acceptors>
    <broker-connections>
      <amqp-connection uri="tcp://hostB:5672#hostC:5672" name="dc2" retry-interval="1000">
        <mirror message-acknowledgements="true"/>
        <federation><local-address-policy name="p" include-address-match="orders.#"/></federation>
      </amqp-connection>
    </broker-connections>
  </core>
</configuration>""")
    assert config.broker_name == "artemis-a" and config.persistent is False
    (conn,) = config.broker_connections
    assert conn.tag == "amqp-connection"
    assert conn.attributes["retry-interval"] == "1000"
    assert [c.tag for c in conn.children] == ["mirror", "federation"]
    assert conn.children[1].children[0].attributes["include-address-match"] == "orders.#"
    assert any("<acceptors>" in w for w in config.warnings)


def test_broker_connections_inside_broker() -> None:
    config = xml('<broker><broker-connections><amqp-connection uri="amqp://b:5672" name="x">'
                 '<sender address-match="q.#"/></amqp-connection></broker-connections></broker>')
    assert config.broker_connections[0].children[0].tag == "sender"


def test_network_connectors_are_kept_and_warned_about() -> None:
    config = xml('<broker><networkConnectors><networkConnector name="nc" '
                 'uri="static:(tcp://b:61616)"/></networkConnectors></broker>')
    assert config.network_connectors[0].attributes["name"] == "nc"
    (warning,) = config.warnings
    assert "activemq.xml:1" in warning and "not supported yet" in warning


# ---------------------------------------------------------------------------
# Errors with file:line
# ---------------------------------------------------------------------------


def test_bad_attribute_values_name_file_line_and_every_error_is_listed() -> None:
    errors = errors_of("""<broker persistent="maybe">
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue=">" queuePrefetch="abc" memoryLimit="lots"/>
  </policyEntries></policyMap></destinationPolicy>
  <systemUsage><systemUsage>
    <memoryUsage><memoryUsage limit="64 zb"/></memoryUsage>
  </systemUsage></systemUsage>
</broker>""")
    assert errors == [
        '<broker persistent="maybe"> at activemq.xml:1: expected true or false',
        '<policyEntry queuePrefetch="abc"> at activemq.xml:3: expected an integer',
        '<policyEntry memoryLimit="lots"> at activemq.xml:3: expected a size such as 64 mb, '
        '1 gb or 1048576',
        '<memoryUsage limit="64 zb"> at activemq.xml:6: expected a size such as 64 mb, 1 gb '
        'or 1048576',
    ]


def test_sizes_are_parsed() -> None:
    config = xml("""<broker><systemUsage><systemUsage>
      <memoryUsage><memoryUsage limit="32mb"/></memoryUsage>
      <storeUsage><storeUsage limit="1 gb"/></storeUsage>
      <tempUsage><tempUsage limit="1048576"/></tempUsage>
    </systemUsage></systemUsage></broker>""")
    usage = config.system_usage
    assert (usage.memory.limit, usage.store.limit, usage.temp.limit) == (32 << 20, 1 << 30, 1 << 20)


def test_transport_connector_errors() -> None:
    errors = errors_of("""<broker><transportConnectors>
  <transportConnector name="a"/>
  <transportConnector name="b" uri="localhost"/>
  <transportConnector name="c" uri="amqp://0.0.0.0:5672"/>
  <transportConnector name="c" uri="stomp://0.0.0.0:61613"/>
</transportConnectors></broker>""")
    assert len(errors) == 3
    assert "activemq.xml:2 needs a uri" in errors[0]
    assert "activemq.xml:3: the uri needs a scheme" in errors[1]
    assert "activemq.xml:5: the name is already used at activemq.xml:4" in errors[2]


def test_persistence_adapter_takes_exactly_one_child() -> None:
    (error,) = errors_of("<broker><persistenceAdapter><kahaDB/><memoryPersistenceAdapter/>"
                         "</persistenceAdapter></broker>")
    assert "holds 2 adapters (<kahaDB>, <memoryPersistenceAdapter>)" in error


def test_spring_bean_in_a_plugin_slot_is_an_error_not_a_warning() -> None:
    errors = errors_of("""<beans xmlns="http://www.springframework.org/schema/beans">
<broker xmlns="http://activemq.apache.org/schema/core">
  <plugins>
    <bean xmlns="http://www.springframework.org/schema/beans" class="com.acme.AuthPlugin"/>
  </plugins>
  <persistenceAdapter>
    <bean xmlns="http://www.springframework.org/schema/beans" class="com.acme.Store"/>
  </persistenceAdapter>
</broker></beans>""")
    assert len(errors) == 2
    assert errors[0].startswith('<bean class="com.acme.AuthPlugin"> at activemq.xml:4 in <plugins>')
    assert "Java component RelayMQ cannot run" in errors[0]
    assert "activemq.xml:7 in <persistenceAdapter>" in errors[1]


def test_element_twice_in_broker_is_an_error() -> None:
    (error,) = errors_of("<broker><plugins/>\n<plugins/></broker>")
    assert "<plugins> at activemq.xml:2 appears twice in <broker> (first at activemq.xml:1)" in error


def test_policy_entry_without_destination() -> None:
    (error,) = errors_of("<broker><destinationPolicy><policyMap><policyEntries>"
                         "<policyEntry queuePrefetch='1'/></policyEntries></policyMap>"
                         "</destinationPolicy></broker>")
    assert "names no destination" in error


def test_unknown_attribute_suggests_the_close_name() -> None:
    config = xml("<broker brokerNmae='x'/>")
    assert "did you mean brokerName?" in config.warnings[0]


def test_malformed_xml_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"activemq.xml:3: not well-formed XML"):
        xml("<broker>\n<plugins>\n</broker>")


def test_dead_letter_queue_child_and_attribute() -> None:
    config = xml("""<broker><destinationPolicy><policyMap><policyEntries>
<policyEntry queue="A"><deadLetterStrategy>
  <sharedDeadLetterStrategy deadLetterQueue="A.DLQ" expiration="5000"/>
</deadLetterStrategy></policyEntry>
<policyEntry topic="T"><deadLetterStrategy>
  <individualDeadLetterStrategy topicPrefix="TDLQ." useQueueForTopicMessages="false"/>
</deadLetterStrategy></policyEntry>
</policyEntries></policyMap></destinationPolicy></broker>""")
    shared = config.policy_entries[0].dead_letter_strategy
    individual = config.policy_entries[1].dead_letter_strategy
    assert (shared.kind, shared.dead_letter_queue, shared.expiration) == ("shared", "A.DLQ", 5000)
    assert (individual.topic_prefix, individual.use_queue_for_topic_messages) == ("TDLQ.", False)


def test_origins_for_plugin_elements() -> None:
    config = xml("<broker>\n<plugins>\n\n<redeliveryPlugin/>\n</plugins></broker>")
    assert config.plugins == [PluginElement("redeliveryPlugin")]
    assert str(config.plugins[0].origin) == "activemq.xml:4"
