"""The neutral document tree both loaders (XML and YAML) produce.

XML and YAML are parsed into the same `Node` tree, and one builder turns that
tree into a `BrokerConfig`; this is what makes "the same config in XML and in
YAML gives an equal BrokerConfig" true by construction rather than by care.
Values in the tree are raw strings *before* `${...}` substitution: substitution
runs only on the parts of the document RelayMQ uses, so a Spring `<bean>` that
names a property nobody defines does not stop a migrated `activemq.xml`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from relaymq.config.model import Origin

#: ActiveMQ Classic's XBean namespace (`<broker xmlns=...>`).
ACTIVEMQ_NS = "http://activemq.apache.org/schema/core"
#: Artemis `broker.xml` namespaces (`<configuration>` and `<core>`).
ARTEMIS_NS = ("urn:activemq", "urn:activemq:core")
#: Spring's bean namespace: `<beans>`, `<bean>`, `<import>`.
SPRING_BEANS_NS = "http://www.springframework.org/schema/beans"

#: Namespaces whose elements RelayMQ reads. No namespace at all is accepted too,
#: so a hand-written `<broker>` and the YAML form need no declarations.
OWN_NAMESPACES = frozenset({"", ACTIVEMQ_NS, *ARTEMIS_NS})


@dataclass(slots=True)
class Node:
    """One element: local tag name, namespace URI ("" for none), raw attributes."""

    tag: str
    ns: str = ""
    attributes: dict[str, str] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    text: str = ""
    origin: Origin = field(default_factory=Origin)

    @property
    def foreign(self) -> bool:
        """True for elements of another vocabulary (Spring `<bean>`, Jetty, ...)."""
        return self.ns not in OWN_NAMESPACES

    def describe(self) -> str:
        """`<tag>` as a user wrote it, for messages."""
        return f"<{self.tag}>"

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()
