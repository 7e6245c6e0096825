"""ActiveMQ's ``<jmsBridgeConnectors>``, loaded as bridges where they map.

```xml
<jmsBridgeConnectors>
  <jmsQueueConnector name="legacy" outboundUri="stomp://legacy:61613"
                     outboundUsername="u" outboundPassword="p">
    <inboundQueueBridges>
      <inboundQueueBridge inboundQueueName="remote.in" localQueueName="local.in"/>
    </inboundQueueBridges>
    <outboundQueueBridges>
      <outboundQueueBridge outboundQueueName="remote.out" localQueueName="local.out"
                           selector="region = 'eu'"/>
    </outboundQueueBridges>
  </jmsQueueConnector>
</jmsBridgeConnectors>
```

ActiveMQ names its peer with Spring connection-factory beans
(``outboundQueueConnectionFactory`` and friends), which speak OpenWire; RelayMQ
cannot use them and refuses them, asking for ``outboundUri`` (an ``amqp://`` or
``stomp://`` URI of the same broker) instead. An inbound bridge goes from the
remote broker to this one (``vm://``), an outbound bridge the other way; a
missing local name means the same name. ``<reconnectionPolicy>``'s
``initialReconnectDelay`` is the retry interval and ``maxReconnectAttempts``
the retries. ActiveMQ's bridges acknowledge after sending: DUPLICATES_OK.
"""

from __future__ import annotations

import logging
from typing import Any

from relaymq.config.model import PluginElement
from relaymq.config.report import at
from relaymq.errors import ConfigError

from relaymq_bridge.bridge import Bridge
from relaymq_bridge.config import BridgeConfig, QualityOfService
from relaymq_bridge.manager import manager_of
from relaymq_bridge.service import local_uri

log = logging.getLogger("relaymq.bridge")

_FACTORY_ATTRS = ("outboundQueueConnectionFactory", "outboundTopicConnectionFactory",
                  "localQueueConnectionFactory", "localTopicConnectionFactory",
                  "outboundQueueConnectionFactoryName", "outboundTopicConnectionFactoryName",
                  "jndiOutboundTemplate", "jndiLocalTemplate")
_KNOWN = {"name", "outboundUri", "outboundUsername", "outboundPassword", "outboundClientId",
          "localUri", "localUsername", "localPassword", "localClientId", "brokerName"}


class _Connector:
    kind = "queue"

    def __init__(self, bridges: list[Bridge], broker: Any) -> None:
        self.bridges = bridges
        self.broker = broker

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any) -> _Connector:
        """A connector that cannot be used (a Java connection factory, no
        outboundUri, a bad bridge element) fails alone: it becomes one FAILED
        bridge named after it, with the reason; the broker and its other bridges run.
        A bad bridge of a usable connector (an invalid selector) fails that bridge."""
        try:
            return cls._build(element, broker)
        except (ConfigError, ValueError) as exc:
            if isinstance(exc, ValueError) and "bridge names must be unique" in str(exc):
                raise
            name = element.attributes.get("name") or f"{cls.kind}-connector"
            why = str(exc)
            log.error("<%s name=\"%s\"> will not run: %s", element.tag, name, why)
            a = element.attributes
            config = BridgeConfig(name=name, source_uri=a.get("localUri", "vm://localhost"),
                                  source_destination="", target_uri=a.get("outboundUri", ""),
                                  target_destination="", origin=element.origin)
            bridge = Bridge(config, broker.outgoing, local_uri(broker), config_error=why)
            manager_of(broker).add(bridge)
            return cls([bridge], broker)

    @classmethod
    def _build(cls, element: PluginElement, broker: Any) -> _Connector:
        where = f"<{element.tag}>{at(element.origin)}"
        a = element.attributes
        refused = [n for n in _FACTORY_ATTRS if n in a]
        if refused:
            raise ConfigError(f"{where}: {', '.join(refused)} name Java connection factories "
                              "(OpenWire), which RelayMQ cannot use; give outboundUri=\"amqp://"
                              "host:5672\" or \"stomp://host:61613\" for the same broker")
        if "outboundUri" not in a:
            raise ConfigError(f"{where}: needs outboundUri (the remote broker's amqp:// or "
                              "stomp:// URI)")
        for name in a:
            if name not in _KNOWN:
                log.warning("%s: attribute %s has no effect in RelayMQ", where, name)
        name = a.get("name") or f"{cls.kind}-connector"
        retry, retries = 5000, -1
        specs: list[tuple[str, dict[str, str]]] = []
        for child in element.children:
            if child.tag == "reconnectionPolicy":
                try:
                    retry = int(child.attributes.get("initialReconnectDelay", retry))
                    retries = int(child.attributes.get("maxReconnectAttempts", retries))
                except ValueError as exc:
                    raise ConfigError(f"{where}: <reconnectionPolicy>: {exc}") from None
                continue
            for b in child.children:
                specs.append((b.tag, b.attributes))
            if not child.children and child.tag not in _WRAPPERS:
                log.warning("%s: <%s> has no effect in RelayMQ", where, child.tag)
        bridges = []
        kind = cls.kind
        cap = kind.capitalize()
        remote = a["outboundUri"]
        local = a.get("localUri", "vm://localhost")
        for tag, attrs in specs:
            inbound = tag == f"inbound{cap}Bridge"
            if tag not in (f"inbound{cap}Bridge", f"outbound{cap}Bridge"):
                raise ConfigError(f"{where}: <{tag}> is not a {kind} bridge (use inbound{cap}Bridge "
                                  f"or outbound{cap}Bridge)")
            remote_name = attrs.get(f"{'inbound' if inbound else 'outbound'}{cap}Name")
            if not remote_name:
                raise ConfigError(f"{where}: <{tag}> needs "
                                  f"{'inbound' if inbound else 'outbound'}{cap}Name")
            local_name = attrs.get(f"local{cap}Name") or remote_name
            remote_dest, local_dest = f"{kind}://{remote_name}", f"{kind}://{local_name}"
            sub = attrs.get("consumerName") if kind == "topic" else None
            config = BridgeConfig(
                name=f"{name}:{'in' if inbound else 'out'}:{remote_name}",
                source_uri=remote if inbound else local,
                source_destination=remote_dest if inbound else local_dest,
                target_uri=local if inbound else remote,
                target_destination=local_dest if inbound else remote_dest,
                source_user=a.get("outboundUsername") if inbound else a.get("localUsername"),
                source_password=a.get("outboundPassword") if inbound else a.get("localPassword"),
                target_user=a.get("localUsername") if inbound else a.get("outboundUsername"),
                target_password=a.get("localPassword") if inbound else a.get("outboundPassword"),
                quality_of_service=QualityOfService.DUPLICATES_OK,
                failure_retry_interval=retry, max_retries=retries,
                selector=attrs.get("selector"), subscription_name=sub,
                client_id=(a.get("outboundClientId") if inbound else a.get("localClientId"))
                or (f"{name}-bridge" if sub else None),
                origin=element.origin)
            bridges.append(Bridge(config, broker.outgoing, local_uri(broker)))
        for bridge in bridges:  # all or nothing: a bad element above fails the connector
            if bridge.config_error is not None:
                log.error("bridge %s will not run: %s", bridge.name, bridge.config_error)
            manager_of(broker).add(bridge)
        return cls(bridges, broker)

    @property
    def state(self) -> str:
        """For management: ``running`` when every bridge runs, else the first other state."""
        states = [b.state.value for b in self.bridges]
        return next((s for s in states if s != "running"), "running")

    def status(self) -> dict[str, Any]:
        return {"bridges": [b.info() for b in self.bridges]}

    async def start(self) -> None:
        for b in self.bridges:
            await b.start()

    async def stop(self) -> None:
        for b in self.bridges:
            await b.stop()  # stays listed: management may start it again


_WRAPPERS = {"inboundQueueBridges", "outboundQueueBridges", "inboundTopicBridges",
             "outboundTopicBridges"}


class JmsQueueConnector(_Connector):
    """``<jmsQueueConnector>``: inbound/outbound queue bridges."""

    kind = "queue"


class JmsTopicConnector(_Connector):
    """``<jmsTopicConnector>``: inbound/outbound topic bridges (``consumerName``: durable)."""

    kind = "topic"
