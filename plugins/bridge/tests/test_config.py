"""Bridge configuration: XML and YAML alike, ActiveMQ's <jmsBridgeConnectors>."""

from __future__ import annotations

from bridge_helpers import produce, until
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.testing import running_broker
from relaymq_bridge.manager import manager_of
from relaymq_bridge.service import bridge_config

XML = """<broker><bridges>
  <bridge name="orders" source-uri="amqp://a:5672" source-destination="queue://orders"
          target-uri="stomp://b:61613" target-destination="/queue/orders"
          quality-of-service="ONCE_AND_ONLY_ONCE" max-batch-size="100" max-batch-time="500"
          failure-retry-interval="5000" max-retries="-1" selector="region = 'eu'"
          subscription-name="bridge-sub" client-id="bridge-1" add-message-id-in-header="true"/>
</bridges></broker>"""

YAML = """broker:
  bridges:
    - bridge:
        name: orders
        source-uri: amqp://a:5672
        source-destination: queue://orders
        target-uri: stomp://b:61613
        target-destination: /queue/orders
        quality-of-service: ONCE_AND_ONLY_ONCE
        max-batch-size: 100
        max-batch-time: 500
        failure-retry-interval: 5000
        max-retries: -1
        selector: "region = 'eu'"
        subscription-name: bridge-sub
        client-id: bridge-1
        add-message-id-in-header: true
"""


def test_xml_and_yaml_give_the_same_bridge() -> None:
    from_xml = load_config_text(XML, "xml")
    from_yaml = load_config_text(YAML, "yaml")
    assert from_xml.bridges == from_yaml.bridges
    cfg = bridge_config(from_xml.bridges[0])
    assert (cfg.quality_of_service.value, cfg.max_batch_size, cfg.max_batch_time,
            cfg.subscription_name, cfg.client_id, cfg.add_message_id_in_header) == (
        "ONCE_AND_ONLY_ONCE", 100, 500, "bridge-sub", "bridge-1", True)


async def test_activemq_jms_bridge_connectors_map_to_bridges() -> None:
    async with running_broker(None, "stomp://127.0.0.1:0", "amqp://127.0.0.1:0") as remote:
        config = load_config_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
            persistent="false">
  <transportConnectors><transportConnector uri="amqp://127.0.0.1:0"/></transportConnectors>
  <jmsBridgeConnectors>
    <jmsQueueConnector name="legacy" outboundUri="stomp://{remote.connector_address('stomp')}">
      <inboundQueueBridges>
        <inboundQueueBridge inboundQueueName="remote.in" localQueueName="local.in"/>
      </inboundQueueBridges>
      <outboundQueueBridges>
        <outboundQueueBridge outboundQueueName="remote.out" localQueueName="local.out"/>
      </outboundQueueBridges>
      <reconnectionPolicy initialReconnectDelay="100" maxReconnectAttempts="-1"/>
    </jmsQueueConnector>
  </jmsBridgeConnectors>
</broker></beans>""", "xml")
        local = Broker(config, strict=True)
        await local.start()
        try:
            names = [b["name"] for b in manager_of(local).list()]
            assert names == ["legacy:in:remote.in", "legacy:out:remote.out"]
            await produce(f"amqp://{remote.connector_address('amqp')}", "queue://remote.in", 4)
            await produce(f"amqp://{local.connector_address('amqp')}", "queue://local.out", 3)
            await until(lambda: local.queue_size("local.in") == 4, what="inbound")
            await until(lambda: remote.queue_size("remote.out") == 3, what="outbound")
            assert manager_of(local).get("legacy:in:remote.in").config.failure_retry_interval == 100
        finally:
            await local.stop()


async def test_an_unusable_connector_fails_alone() -> None:
    """Java connection factories are refused clearly, and so is a connector without
    outboundUri or with a bridge element it cannot have; each fails alone (state
    failed, the reason in management), the broker and a good connector run; a bad
    selector on one bridge of a connector fails that bridge only."""
    async with running_broker(None, "amqp://127.0.0.1:0") as remote:
        config = load_config_text(f"""<broker persistent="false">
  <transportConnectors><transportConnector uri="amqp://127.0.0.1:0"/></transportConnectors>
  <jmsBridgeConnectors>
  <jmsQueueConnector name="java" outboundQueueConnectionFactory="#remoteFactory"/>
  <jmsQueueConnector name="nouri"/>
  <jmsQueueConnector name="mixed" outboundUri="amqp://127.0.0.1:1">
    <outboundQueueBridges><outboundTopicBridge outboundTopicName="t"/></outboundQueueBridges>
  </jmsQueueConnector>
  <jmsQueueConnector name="good" outboundUri="amqp://{remote.connector_address('amqp')}">
    <outboundQueueBridges>
      <outboundQueueBridge outboundQueueName="remote.out" localQueueName="local.out"/>
      <outboundQueueBridge outboundQueueName="remote.bad" selector="a = = 1"/>
    </outboundQueueBridges>
  </jmsQueueConnector>
</jmsBridgeConnectors></broker>""", "xml")
        local = Broker(config, strict=True)
        await local.start()
        try:
            views = {b["name"]: b for b in manager_of(local).list()}
            assert set(views) == {"java", "nouri", "mixed", "good:out:remote.out",
                                  "good:out:remote.bad"}
            for name, reason in [("java", "give outboundUri"), ("nouri", "needs outboundUri"),
                                 ("mixed", "is not a queue bridge"),
                                 ("good:out:remote.bad", "invalid selector")]:
                assert views[name]["state"] == "failed", views[name]
                assert reason in views[name]["last_error"], views[name]
            connections = {c.name: c.state for c in local.management.broker_connections()}
            assert connections["java"] == "failed"
            await produce(f"amqp://{local.connector_address('amqp')}", "queue://local.out", 2)
            await until(lambda: remote.queue_size("remote.out") == 2, what="the good bridge")
        finally:
            await local.stop()
