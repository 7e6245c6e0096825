"""The document root and `<broker>` -> `BrokerConfig`.

Accepted roots: a Spring ``<beans>`` wrapper around one ``<broker>`` (the stock
ActiveMQ file), a bare ``<broker>``, and an Artemis ``<configuration><core>`` of
which the ``<broker-connections>`` part is read. Everything RelayMQ does not use
is named in one warning each; elements in plugin slots (``persistenceAdapter``,
``plugins``, ``destinationInterceptors``, ``broker-connections``) are kept as
`PluginElement`s for the registry, which refuses names no installed plugin
provides: a storage or security element is never silently dropped.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from relaymq.config.context import BuildContext
from relaymq.config.logging_builder import LOGGING_ELEMENTS, logging_element
from relaymq.config.model import BrokerConfig, DestinationDecl, TransportConnectorConfig
from relaymq.config.policy_builder import destination_policy
from relaymq.config.properties import parse_java_properties
from relaymq.config.report import at
from relaymq.config.tree import ARTEMIS_NS, Node
from relaymq.config.typed import coerce
from relaymq.config.usage_builder import system_usage
from relaymq.config.web_console import jetty_import, management_context
from relaymq.errors import ConfigError

#: `<broker>` attributes -> `BrokerConfig` fields.
BROKER_ATTRIBUTES = {
    "brokerName": "broker_name",
    "dataDirectory": "data_directory",
    "persistent": "persistent",
    "useJmx": "use_jmx",
    "schedulerSupport": "scheduler_support",
    "advisorySupport": "advisory_support",
    "populateJMSXUserID": "populate_jmsx_user_id",
}

#: Plugin slots: wrapper element -> (`BrokerConfig` field, entry-point group).
PLUGIN_SLOTS = {
    "plugins": ("plugins", "relaymq.broker_plugins"),
    "destinationInterceptors": ("destination_interceptors", "relaymq.destination_interceptors"),
    "broker-connections": ("broker_connections", "relaymq.broker_connections"),
    "bridges": ("bridges", "relaymq.bridges"),
    "jmsBridgeConnectors": ("jms_bridge_connectors", "relaymq.bridges"),
}
PERSISTENCE_SLOT = ("persistenceAdapter", "relaymq.persistence")

#: Well-known ActiveMQ broker children RelayMQ ignores, with the reason users need.
KNOWN_IGNORED = {
    "sslContext": "give TLS files on the connector URI instead "
                  "(?certFile=server.pem&keyFile=server.key; convert Java keystores to PEM)",
    "shutdownHooks": "RelayMQ stops on SIGINT/SIGTERM by itself",
    "proxyConnectors": "proxy connectors are not supported",
    "jobSchedulerStore": "the scheduler keeps its jobs in the persistence adapter",
    "tempDataStore": "RelayMQ keeps temporary data in the persistence adapter",
    "ioExceptionHandler": "a store I/O error always stops the broker",
    "producerSystemUsage": "use <systemUsage>",
    "consumerSystemUsage": "use <systemUsage>",
    "services": "Spring services are Java beans",
}

#: Spring placeholder configurer classes whose property files are read.
_PLACEHOLDER_BEANS = (
    "org.springframework.beans.factory.config.PropertyPlaceholderConfigurer",
    "org.springframework.context.support.PropertySourcesPlaceholderConfigurer",
)

_Handler = Callable[[BuildContext, Node, BrokerConfig], None]


# ---------------------------------------------------------------------------
# Roots
# ---------------------------------------------------------------------------


def build(ctx: BuildContext, root: Node, source: str) -> BrokerConfig:
    config = BrokerConfig(source=source)
    if root.tag == "beans":
        broker = _beans(ctx, root, config)
    elif root.tag == "broker" and not root.foreign:
        broker = root
    elif root.tag == "configuration" and root.ns in ("", *ARTEMIS_NS):
        _artemis(ctx, root, config)
        return config
    else:
        raise ConfigError(
            f"{root.origin}: the root element is <{root.tag}>; RelayMQ reads a Spring <beans> "
            "file with a <broker> inside, a bare <broker>, or an Artemis <configuration>"
        )
    if broker is not None:
        _broker(ctx, broker, config)
    for bean_id, bean in ctx.beans.items():
        if bean_id not in ctx.used_beans:
            ctx.ignore_foreign(bean, root)
    return config


def _beans(ctx: BuildContext, root: Node, config: BrokerConfig) -> Node | None:
    brokers = [c for c in root.children if c.tag == "broker" and not c.foreign]
    for child in root.children:
        if child in brokers:
            continue
        if child.tag == "bean" and child.attributes.get("class") in _PLACEHOLDER_BEANS:
            _placeholder_bean(ctx, child)
        elif child.tag == "bean" and child.attributes.get("id"):
            # kept for `attr="#id"` references (a JDBC data source); warned about
            # after the broker is read if nothing refers to it
            ctx.beans[child.attributes["id"]] = child
        elif child.tag == "import" and jetty_import(ctx, child, config):
            continue
        elif child.tag == "import":
            resource = child.attributes.get("resource", "")
            ctx.report.warn(
                f"<import resource=\"{resource}\">{at(child.origin)} is ignored: RelayMQ does not "
                "load Spring imports (jetty.xml is ActiveMQ's web console; see relaymq-console)"
            )
        elif child.foreign:
            ctx.ignore_foreign(child, root)
        else:
            ctx.unknown_element(child, root, ["broker"])
    if not brokers:
        ctx.report.error(f"{root.origin}: <beans> holds no <broker> element")
        return None
    if len(brokers) > 1:
        lines = ", ".join(str(b.origin) for b in brokers)
        ctx.report.error(f"{root.origin}: <beans> holds {len(brokers)} <broker> elements "
                         f"({lines}); RelayMQ runs one broker per file")
    return brokers[0]


def _placeholder_bean(ctx: BuildContext, bean: Node) -> None:
    """Load the ``file:`` properties a PropertyPlaceholderConfigurer names."""
    locations: list[tuple[str, Node]] = []
    for prop in bean.children:
        if prop.tag != "property" or prop.attributes.get("name") not in ("location", "locations"):
            continue
        if "value" in prop.attributes:
            locations.append((prop.attributes["value"], prop))
        for value_node in (n for n in prop.walk() if n.tag == "value"):
            locations.append((value_node.text, value_node))
    for raw, node in locations:
        location = ctx.sub(raw.strip(), node)
        if not location:
            continue
        if not location.startswith("file:"):
            ctx.report.warn(f"<{node.tag}> at {node.origin}: property location '{location}' is "
                            "ignored: only file: locations can be read outside Java")
            continue
        path = Path(location[len("file:"):])
        try:
            text = path.read_text(encoding="latin-1")
        except OSError as exc:
            ctx.report.warn(f"<{node.tag}> at {node.origin}: cannot read the properties file "
                            f"{path} ({exc.strerror}); the names it defines stay undefined")
            continue
        for key, value in parse_java_properties(text).items():
            ctx.props.files.setdefault(key, value)
        ctx.report.note(f"<{node.tag}> at {node.origin}: read properties from {path}")


def _artemis(ctx: BuildContext, root: Node, config: BrokerConfig) -> None:
    cores = [c for c in root.children if c.tag == "core"]
    for child in root.children:
        if child.tag != "core":
            ctx.unknown_element(child, root, ["core"], reason="only <core> is read from broker.xml")
    for core in cores:
        for child in core.children:
            if child.tag == "name" and child.text:
                config.broker_name = ctx.sub(child.text, child) or config.broker_name
            elif child.tag == "persistence-enabled" and child.text:
                _set_broker_attr(ctx, child, config, "persistent", child.text)
            elif child.tag == "broker-connections":
                _plugin_slot(ctx, child, config)
            else:
                ctx.unknown_element(child, core, reason="only <name>, <persistence-enabled> and "
                                    "<broker-connections> are read from an Artemis broker.xml")


# ---------------------------------------------------------------------------
# <broker>
# ---------------------------------------------------------------------------


def _set_broker_attr(ctx: BuildContext, node: Node, config: BrokerConfig, field: str,
                     raw: str, attr: str | None = None) -> None:
    value = ctx.sub(raw, node)
    if value is None:
        return
    try:
        hints = typing.get_type_hints(BrokerConfig)
        setattr(config, field, coerce(hints[field], value))
    except ValueError as exc:
        shown = f" {attr}=\"{raw}\"" if attr else ""
        ctx.report.error(f"<{node.tag}{shown}>{at(node.origin)}: {exc}")


def _broker(ctx: BuildContext, broker: Node, config: BrokerConfig) -> None:
    for attr, raw in broker.attributes.items():
        field = BROKER_ATTRIBUTES.get(attr)
        if field is None:
            ctx.unknown_attribute(attr, broker, list(BROKER_ATTRIBUTES))
            continue
        _set_broker_attr(ctx, broker, config, field, raw, attr)
        if attr == "useJmx":
            ctx.report.note(f"<broker useJmx=\"{raw}\">{at(broker.origin)} is accepted and "
                            "ignored: RelayMQ has no JMX (relaymq-console serves management)")
    seen: dict[str, Node] = {}
    for child in broker.children:
        if child.foreign:
            ctx.ignore_foreign(child, broker)
            continue
        handler = BROKER_CHILDREN.get(child.tag)
        if handler is None:
            reason = KNOWN_IGNORED.get(child.tag)
            ctx.unknown_element(child, broker, list(BROKER_CHILDREN), reason)
            continue
        if child.tag in seen:
            ctx.report.error(f"<{child.tag}>{at(child.origin)} appears twice in <broker> "
                             f"(first at {seen[child.tag].origin}); merge them into one")
            continue
        seen[child.tag] = child
        handler(ctx, child, config)


def _transport_connectors(ctx: BuildContext, node: Node, config: BrokerConfig) -> None:
    names: dict[str, TransportConnectorConfig] = {}
    for child in node.children:
        if child.foreign:
            ctx.ignore_foreign(child, node)
            continue
        if child.tag != "transportConnector":
            ctx.unknown_element(child, node, ["transportConnector"])
            continue
        attrs = ctx.attrs(child)
        for name in attrs:
            if name not in ("name", "uri"):
                ctx.unknown_attribute(name, child, ["name", "uri"])
        uri = attrs.get("uri")
        if not uri:
            if "uri" not in child.attributes:
                ctx.report.error(f"<transportConnector>{at(child.origin)} needs a uri, e.g. "
                                 "uri=\"amqp://0.0.0.0:5672\"")
            continue
        if not urlsplit(uri).scheme:
            ctx.report.error(f"<transportConnector uri=\"{uri}\">{at(child.origin)}: the uri needs "
                             "a scheme, e.g. amqp://0.0.0.0:5672")
            continue
        tc = TransportConnectorConfig(name=attrs.get("name"), uri=uri, origin=child.origin)
        if tc.name is not None and tc.name in names:
            ctx.report.error(f"<transportConnector name=\"{tc.name}\">{at(child.origin)}: the name "
                             f"is already used at {names[tc.name].origin}")
            continue
        if tc.name is not None:
            names[tc.name] = tc
        config.transport_connectors.append(tc)


def _persistence_adapter(ctx: BuildContext, node: Node, config: BrokerConfig) -> None:
    for attr in node.attributes:
        ctx.unknown_attribute(attr, node)
    own = [c for c in node.children if not c.foreign]
    for child in node.children:
        if child.foreign:
            _foreign_in_slot(ctx, child, node)
    if not own:
        ctx.report.warn(f"<persistenceAdapter>{at(node.origin)} is empty; the default store is used")
        return
    if len(own) > 1:
        ctx.report.error(
            f"<persistenceAdapter>{at(node.origin)} holds {len(own)} adapters "
            f"({', '.join('<' + c.tag + '>' for c in own)}); it takes exactly one"
        )
        return
    config.persistence_adapter = ctx.element(own[0])


def _plugin_slot(ctx: BuildContext, node: Node, config: BrokerConfig) -> None:
    field, _group = PLUGIN_SLOTS[node.tag]
    for attr in node.attributes:
        ctx.unknown_attribute(attr, node)
    target = getattr(config, field)
    for child in node.children:
        if child.foreign:
            _foreign_in_slot(ctx, child, node)
        else:
            target.append(ctx.element(child))


def _foreign_in_slot(ctx: BuildContext, child: Node, slot: Node) -> None:
    """A Spring bean in a plugin slot is an error, never a warning: it may be the
    security or storage the operator relies on."""
    cls = child.attributes.get("class")
    what = f"<{child.tag} class=\"{cls}\">" if cls else f"<{child.tag} xmlns=\"{child.ns}\">"
    ctx.report.error(
        f"{what}{at(child.origin)} in <{slot.tag}> is a Java component RelayMQ cannot run; "
        "replace it with a RelayMQ plugin element (see `relaymq plugins list`) or remove it"
    )


def _destinations(ctx: BuildContext, node: Node, config: BrokerConfig) -> None:
    for child in node.children:
        if child.foreign:
            ctx.ignore_foreign(child, node)
            continue
        if child.tag not in ("queue", "topic"):
            ctx.unknown_element(child, node, ["queue", "topic"])
            continue
        attrs = ctx.attrs(child)
        known = (["physicalName", "queueType", "topicSubscriptions"] if child.tag == "queue"
                 else ["physicalName"])
        for name in attrs:
            if name not in known:
                ctx.unknown_attribute(name, child, known)
        name = attrs.get("physicalName", "").strip()
        if not name:
            if "physicalName" not in child.attributes or child.attributes["physicalName"].strip() == "":
                ctx.report.error(f"<{child.tag}>{at(child.origin)} needs physicalName=\"NAME\"")
            continue
        queue_type = attrs.get("queueType", "").strip() if child.tag == "queue" else ""
        subs = attrs.get("topicSubscriptions", "").strip() if child.tag == "queue" else ""
        config.destinations.append(DestinationDecl(child.tag, name, child.origin, queue_type or None,
                                                   subs or None))


def _network_connectors(ctx: BuildContext, node: Node, config: BrokerConfig) -> None:
    for child in node.children:
        if child.foreign:
            ctx.ignore_foreign(child, node)
            continue
        element = ctx.element(child)
        config.network_connectors.append(element)
        name = element.attributes.get("name") or element.attributes.get("uri") or ""
        ctx.report.warn(
            f"<{child.tag}{' ' + repr(name) if name else ''}>{at(child.origin)} is ignored: network "
            "connectors are not supported yet (use <broker-connections> with relaymq-federation)"
        )


BROKER_CHILDREN: dict[str, _Handler] = {
    "transportConnectors": _transport_connectors,
    "persistenceAdapter": _persistence_adapter,
    "destinationPolicy": destination_policy,
    "destinationInterceptors": _plugin_slot,
    "plugins": _plugin_slot,
    "systemUsage": system_usage,
    "destinations": _destinations,
    "networkConnectors": _network_connectors,
    "broker-connections": _plugin_slot,
    "logging": logging_element,
    "bridges": _plugin_slot,
    "jmsBridgeConnectors": _plugin_slot,
    "managementContext": management_context,
}

#: Every element name `<broker>` understands directly (for docs and tests).
BROKER_ELEMENTS = ("beans", "broker", "transportConnector", "queue", "topic",
                   *BROKER_CHILDREN, *LOGGING_ELEMENTS)
