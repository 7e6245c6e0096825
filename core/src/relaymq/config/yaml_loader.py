"""Parse the YAML form of an activemq.xml tree into the same `Node` tree as XML.

The mapping is mechanical so that any XML config can be rewritten by hand:

* the document is a mapping with one key, the root element (``broker:``, or
  ``beans:`` around a ``broker:`` as in XML);
* in an element's mapping, a scalar value is an attribute (``brokerName: b1``),
  a mapping value is a child element (``persistenceAdapter: {kahaDB: {...}}``),
  and a list value is a child element whose children are the list items
  (``transportConnectors: [{transportConnector: {name: amqp, uri: ...}}]``);
* each list item is a one-key mapping ``{tag: body}``, so repeated tags and their
  order survive; an empty element is ``tag: {}`` or ``tag: ~``;
* ``_text`` holds an element's text content (``<value>x</value>`` ->
  ``value: {_text: x}``).

Why ``yaml.compose`` with the ``SafeLoader`` and not ``safe_load``: compose builds
the same node graph ``safe_load`` builds before constructing Python objects, and
those nodes carry line numbers, which every config error needs. It never
constructs arbitrary objects. Aliases are expanded with a node budget, so a
YAML "billion laughs" is refused like its XML cousin.
"""

from __future__ import annotations

import yaml

from relaymq.config.model import Origin
from relaymq.config.tree import Node
from relaymq.errors import ConfigError

#: Upper bound on elements + attributes after alias expansion.
MAX_NODES = 100_000
MAX_DEPTH = 100
TEXT_KEY = "_text"
_NULL_TAG = "tag:yaml.org,2002:null"
#: The only YAML tags a config may carry; ``!!python/...`` and custom tags are refused
#: outright rather than silently read as strings.
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq",
                                        "timestamp")
)


class _Builder:
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.count = 0

    def origin(self, node: yaml.Node) -> Origin:
        return Origin(self.filename, node.start_mark.line + 1)

    def fail(self, node: yaml.Node, message: str) -> ConfigError:
        return ConfigError(f"{self.filename}:{node.start_mark.line + 1}: {message}")

    def tick(self, node: yaml.Node, depth: int) -> None:
        if node.tag not in _PLAIN_TAGS:
            raise self.fail(node, f"the YAML tag {node.tag} is not allowed in a RelayMQ config; "
                                  "write plain values")
        self.count += 1
        if self.count > MAX_NODES or depth > MAX_DEPTH:
            raise self.fail(
                node,
                "the document expands to too many elements (nested YAML aliases?); RelayMQ "
                f"refuses YAML that expands beyond {MAX_NODES} nodes or {MAX_DEPTH} levels",
            )

    def element(self, tag: str, body: yaml.Node, origin: Origin, depth: int) -> Node:
        self.tick(body, depth)
        node = Node(tag, origin=origin)
        if isinstance(body, yaml.ScalarNode):
            if body.tag != _NULL_TAG:
                node.text = body.value
        elif isinstance(body, yaml.SequenceNode):
            node.children = self.items(body, depth)
        elif isinstance(body, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value in body.value:
                key = self.key(key_node)
                if key in seen:
                    raise self.fail(key_node, f"'{key}' appears twice in <{tag}>; use a list "
                                              "for repeated elements")
                seen.add(key)
                if isinstance(value, yaml.ScalarNode) and value.tag != _NULL_TAG:
                    self.tick(value, depth + 1)
                    if key == TEXT_KEY:
                        node.text = value.value
                    else:
                        node.attributes[key] = value.value
                else:
                    node.children.append(self.element(key, value, self.origin(key_node), depth + 1))
        return node

    def items(self, seq: yaml.SequenceNode, depth: int) -> list[Node]:
        out = []
        for item in seq.value:
            if not isinstance(item, yaml.MappingNode) or len(item.value) != 1:
                raise self.fail(
                    item,
                    "each list item must be one element written as '- tag: {attributes}' "
                    "(e.g. '- transportConnector: {name: amqp, uri: amqp://0.0.0.0:5672}')",
                )
            key_node, value = item.value[0]
            out.append(self.element(self.key(key_node), value, self.origin(key_node), depth + 1))
        return out

    def key(self, node: yaml.Node) -> str:
        if isinstance(node, yaml.ScalarNode) and (
                node.tag == "tag:yaml.org,2002:merge" or node.value == "<<"):
            raise self.fail(node, "YAML merge keys (<<) are not supported; write the element out")
        if not isinstance(node, yaml.ScalarNode) or node.tag not in _PLAIN_TAGS:
            raise self.fail(node, "keys must be plain element or attribute names")
        return str(node.value)


def parse_yaml(text: str | bytes, filename: str = "<text>") -> Node:
    """Parse ``text`` and return the root element.

    :raises ConfigError: invalid YAML or a shape that is not an element tree (file:line).
    """
    try:
        doc = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{filename}{line}: not valid YAML: {exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{filename}: not valid YAML: {exc}") from exc
    if doc is None:
        raise ConfigError(f"{filename}: the document is empty; it needs a top-level 'broker:' key")
    builder = _Builder(filename)
    if not isinstance(doc, yaml.MappingNode) or len(doc.value) != 1:
        raise builder.fail(doc, "the document must be a mapping with one key, the root element "
                                "('broker:')")
    key_node, body = doc.value[0]
    return builder.element(builder.key(key_node), body, builder.origin(key_node), 0)
