"""State shared while one config tree is turned into a `BrokerConfig`.

The builders (broker, policy, usage) are small functions over `Node`s; this
object gives them the three things they all need: `${}` substitution, a report
for warnings and errors, and conversion of a node into a substituted
`PluginElement` or a typed dataclass, with failures recorded rather than raised
so one run reports every problem.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

from relaymq.config.model import PluginElement
from relaymq.config.properties import Properties
from relaymq.config.report import Report, at
from relaymq.config.tree import Node
from relaymq.config.typed import convert, suggest
from relaymq.errors import ConfigError

T = TypeVar("T")


class BuildContext:
    def __init__(self, props: Properties, report: Report) -> None:
        self.props = props
        self.report = report
        #: Spring ``<bean id=...>`` elements of the document, by id: plugin elements
        #: refer to them as ``attr="#id"`` (a JDBC store's ``dataSource="#pg-ds"``).
        self.beans: dict[str, Node] = {}
        self.used_beans: set[str] = set()

    # -- values ------------------------------------------------------------

    def sub(self, text: str, node: Node) -> str | None:
        """Substitute ``${}`` in ``text``; on failure record the error and return None."""
        try:
            return self.props.substitute(text, node.origin)
        except ConfigError as exc:
            self.report.absorb(exc)
            return None

    def attrs(self, node: Node) -> dict[str, str]:
        """The node's attributes with ``${}`` substituted (failed ones left out)."""
        out: dict[str, str] = {}
        for name, raw in node.attributes.items():
            value = self.sub(raw, node)
            if value is not None:
                out[name] = value
        return out

    def element(self, node: Node, *, drop_foreign: bool = True) -> PluginElement:
        """A substituted `PluginElement` of ``node`` and its whole subtree.

        Foreign-namespace descendants (a Spring ``<bean>`` inside ``<kahaDB>``) are
        warned about and dropped: a plugin cannot interpret Java beans. A reference
        to a document bean (``dataSource="#pg-ds"``) appends that bean, whole, as a
        ``<bean>`` child, so the plugin can translate what it understands of it.
        """
        children: list[PluginElement] = []
        for child in node.children:
            if child.foreign and drop_foreign:
                self.ignore_foreign(child, node)
                continue
            children.append(self.element(child, drop_foreign=drop_foreign))
        for raw in node.attributes.values():
            ref = raw.strip()
            if ref.startswith("#") and ref[1:] in self.beans:
                self.used_beans.add(ref[1:])
                children.append(self.element(self.beans[ref[1:]], drop_foreign=False))
        text = self.sub(node.text, node) if node.text else ""
        return PluginElement(node.tag, self.attrs(node), children, text or "", node.origin)

    def typed(self, cls: type[T], node: Node, ignore: Collection[str] = ()) -> T | None:
        """`convert` the node into ``cls``; errors go to the report (returns None)."""
        try:
            return convert(cls, self.element(node), report=self.report, ignore=ignore)
        except ConfigError as exc:
            self.report.absorb(exc)
            return None

    # -- diagnostics -------------------------------------------------------

    def unknown_element(self, node: Node, parent: Node, known: Collection[str] = (),
                        reason: str | None = None) -> None:
        why = reason or "RelayMQ does not support it"
        self.report.warn(
            f"<{node.tag}>{at(node.origin)} inside <{parent.tag}> is ignored: {why}"
            f"{suggest(node.tag, known) if not reason else ''}"
        )

    def unknown_attribute(self, name: str, node: Node, known: Collection[str] = (),
                          reason: str | None = None) -> None:
        why = reason or "RelayMQ does not support it"
        self.report.warn(
            f"<{node.tag}>{at(node.origin)}: attribute '{name}' is ignored: {why}"
            f"{suggest(name, known) if not reason else ''}"
        )

    def ignore_foreign(self, node: Node, parent: Node) -> None:
        cls = node.attributes.get("class")
        what = f"<{node.tag} class=\"{cls}\">" if cls else f"<{node.tag}>"
        self.report.warn(
            f"{what}{at(node.origin)} inside <{parent.tag}> is ignored: it belongs to another "
            f"vocabulary ({node.ns}) that RelayMQ does not run"
        )

    def single_child(self, node: Node, tag: str | None = None) -> Node | None:
        """The one own-namespace child of a wrapper like ``<systemUsage><systemUsage>``."""
        own = [c for c in node.children if not c.foreign]
        for c in node.children:
            if c.foreign:
                self.ignore_foreign(c, node)
        if tag is not None:
            for c in own:
                if c.tag != tag:
                    self.unknown_element(c, node, [tag])
            own = [c for c in own if c.tag == tag]
        if len(own) > 1:
            self.report.error(
                f"<{node.tag}>{at(node.origin)} holds {len(own)} elements "
                f"({', '.join('<' + c.tag + '>' for c in own)}); it takes exactly one"
            )
        return own[0] if own else None
