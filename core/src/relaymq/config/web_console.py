"""ActiveMQ's web console and JMX settings -> the web console plugin's element.

An ActiveMQ user's `activemq.xml` imports `jetty.xml` (the web console on
127.0.0.1:8161, behind the users of `jetty-realm.properties`) and has a
`<managementContext>` (JMX). RelayMQ has no Jetty and no JMX; its web console,
REST API and Jolokia-style reads are the `<console>` plugin (relaymq-console).
This module reads what of those two has a `<console>` equivalent and records it
as an implied `<console>` element (`BrokerConfig.extra[IMPLIED]`), which the broker
enables when relaymq-console is installed and the file has no `<console>` of its
own (see docs/console.md). What has no equivalent is named in one note each.
"""

from __future__ import annotations

from pathlib import Path

from relaymq.config.context import BuildContext
from relaymq.config.model import BrokerConfig, PluginElement
from relaymq.config.report import at
from relaymq.config.tree import Node
from relaymq.config.xml_loader import parse_xml
from relaymq.errors import ConfigError

#: `BrokerConfig.extra` key: plugin elements implied by other products' settings
IMPLIED = "implied_plugins"
CONSOLE = "console"

#: `<managementContext>` attributes that map, and what they become
MAPPED_MANAGEMENT = {
    "createConnector": "true: serve the management API (relaymq-console) even without jetty.xml",
    "jmxDomainName": "the domain of the console's Jolokia-style MBean names",
}
#: `<managementContext>` attributes with no RelayMQ equivalent, and why
UNMAPPED_MANAGEMENT = {
    "connectorPort": "there is no JMX/RMI connector; JMX clients (jconsole, VisualVM) cannot "
                     "connect; read the same attributes over HTTP at the console's "
                     "/api/jolokia/read/... or /api/v1",
    "connectorHost": "no JMX/RMI connector (the console listens on its own host/port)",
    "rmiServerPort": "no JMX/RMI connector",
    "connectorPath": "no JMX/RMI connector",
    "createMBeanServer": "no MBean server",
    "useMBeanServer": "no MBean server",
    "findTigerMbeanServer": "no MBean server",
    "suppressMBean": "there are no MBeans to suppress",
    "allowRemoteAddressInMBeanNames": "there are no MBeans",
}


def _implied_console(config: BrokerConfig, origin: Node) -> PluginElement:
    implied: list[PluginElement] = config.extra.setdefault(IMPLIED, [])
    for el in implied:
        if el.tag == CONSOLE:
            return el
    el = PluginElement(CONSOLE, {}, [], "", origin.origin)
    implied.append(el)
    return el


def management_context(ctx: BuildContext, node: Node, config: BrokerConfig) -> None:
    """`<managementContext [attrs]>` or ActiveMQ's nested
    `<managementContext><managementContext attrs/></managementContext>`."""
    attrs = ctx.attrs(node)
    for child in node.children:
        if child.tag == "managementContext":
            attrs.update(ctx.attrs(child))
        elif child.foreign:
            ctx.ignore_foreign(child, node)
        else:
            ctx.report.note(f"<{child.tag}>{at(child.origin)} in <managementContext> is "
                            "ignored: RelayMQ has no JMX")
    for name, value in attrs.items():
        why = UNMAPPED_MANAGEMENT.get(name)
        if why is not None:
            ctx.report.note(f"<managementContext {name}=\"{value}\">{at(node.origin)} has no "
                            f"RelayMQ equivalent: {why}")
        elif name not in MAPPED_MANAGEMENT:
            ctx.unknown_attribute(name, node, [*MAPPED_MANAGEMENT, *UNMAPPED_MANAGEMENT])
    domain = attrs.get("jmxDomainName", "").strip()
    create = attrs.get("createConnector", "").strip().lower() == "true"
    if not domain and not create:
        return
    console = _implied_console(config, node)
    if domain:
        console.attributes.setdefault("jmxDomainName", domain)
    if create:
        console.attributes.setdefault("impliedBy", f"<managementContext createConnector=\"true\">"
                                                   f"{at(node.origin)}")


def _bean_props(root: Node, ctx: BuildContext) -> dict[str, dict[str, str]]:
    """bean id -> {property name: value} of a Spring file (values substituted)."""
    out: dict[str, dict[str, str]] = {}
    for bean in root.walk():
        if bean.tag != "bean" or not bean.attributes.get("id"):
            continue
        props: dict[str, str] = {}
        for prop in bean.children:
            if prop.tag == "property" and "name" in prop.attributes and "value" in prop.attributes:
                value = ctx.sub(prop.attributes["value"], prop)
                if value is not None:
                    props[prop.attributes["name"]] = value
        out[bean.attributes["id"]] = props
    return out


def _resolve(resource: str, importer: Node) -> Path:
    path = Path(resource.removeprefix("file:"))
    if not path.is_absolute():
        path = Path(importer.origin.file).resolve().parent / path
    return path


def jetty_import(ctx: BuildContext, node: Node, config: BrokerConfig) -> bool:
    """`<import resource="...jetty.xml"/>`: the web console's host, port and login
    as the console's settings. False when the resource is not a jetty.xml."""
    raw = node.attributes.get("resource", "")
    resource = ctx.sub(raw, node) or raw
    if not resource.rsplit("/", 1)[-1].startswith("jetty") or not resource.endswith(".xml"):
        return False
    where = f"<import resource=\"{raw}\">{at(node.origin)}"
    if resource.startswith("classpath:"):
        ctx.report.warn(f"{where} is ignored: RelayMQ cannot read the Java classpath; "
                        "give the web console's settings as <console host= port=/>")
        return True
    path = _resolve(resource, node)
    try:
        root = parse_xml(path.read_bytes(), str(path))
    except OSError as exc:
        ctx.report.warn(f"{where}: cannot read {path} ({exc.strerror}); the web console's "
                        "settings it holds are not used")
        return True
    except ConfigError as exc:
        ctx.report.warn(f"{where}: {exc}; the web console's settings it holds are not used")
        return True
    beans = _bean_props(root, ctx)
    console = _implied_console(config, node)
    attrs = console.attributes
    mapped = []
    port = beans.get("jettyPort", {})
    for name in ("host", "port"):
        if port.get(name):
            attrs[name] = port[name]
            mapped.append(f"{name}={port[name]}")
    user = beans.get("securityConstraint", {})
    admin = beans.get("adminSecurityConstraint", {})
    if user.get("authenticate", "true").strip().lower() == "false":
        attrs["authenticate"] = "false"
        mapped.append("authenticate=false (no login)")
    admin_roles = [r.strip() for r in admin.get("roles", "").split(",") if r.strip()]
    user_roles = [r.strip() for r in user.get("roles", "").split(",") if r.strip()]
    if admin_roles:
        attrs["adminGroup"] = admin_roles[0]
        mapped.append(f"adminGroup={admin_roles[0]}")
    viewers = [r for r in user_roles if r not in admin_roles]
    if viewers:
        attrs["viewerGroup"] = viewers[0]
        mapped.append(f"viewerGroup={viewers[0]}")
    realm = beans.get("securityLoginService", {}).get("config", "").strip()
    if realm and attrs.get("authenticate") != "false":
        realm_path = _resolve(realm, root)
        attrs["usersFile"] = str(realm_path)
        mapped.append(f"usersFile={realm_path}")
    attrs["impliedBy"] = f"{path}"  # jetty.xml's settings win over managementContext's
    ctx.report.note(f"{where}: the web console's settings map to relaymq-console's "
                    f"<console {' '.join(mapped) or '(defaults)'}/> (used when relaymq-console "
                    "is installed and the file has no <console> element)")
    return True
