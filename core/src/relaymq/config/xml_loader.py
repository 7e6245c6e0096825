"""Parse activemq.xml-style XML into a `Node` tree, hardened and with line numbers.

Why SAX (through defusedxml) rather than ElementTree: the SAX locator gives the
line of every start tag, which every config error needs (`activemq.xml:14`), and
defusedxml's expat reader refuses entity declarations (billion laughs) and
external references (XXE) before any expansion happens. A config file is
operator input, but it is also a file copied from wikis and mailing lists.

Like the YAML loader, it bounds what it builds: a document larger than
`MAX_BYTES`, nested deeper than `MAX_DEPTH` elements or holding more than
`MAX_NODES` elements and attributes is refused with one clear line, instead of
a RecursionError in a later tree walk or minutes of parsing. Real activemq.xml
files are a few hundred elements, ten or so deep, and tens of kilobytes.
"""

from __future__ import annotations

import io
from xml.sax import SAXParseException
from xml.sax.handler import ContentHandler, feature_namespaces
from xml.sax.xmlreader import AttributesNSImpl, Locator

import defusedxml.sax
from defusedxml.common import DefusedXmlException, EntitiesForbidden

from relaymq.config.model import Origin
from relaymq.config.tree import Node
from relaymq.errors import ConfigError

#: Largest config document accepted, in bytes.
MAX_BYTES = 16 << 20
#: Deepest element nesting accepted (the root is level 1).
MAX_DEPTH = 100
#: Upper bound on elements + attributes.
MAX_NODES = 100_000


class _TooLarge(Exception):
    """Raised from the SAX handler to stop parsing at a limit."""


def too_large_message(size: int) -> str:
    return (f"the document is {size} bytes; RelayMQ refuses config files larger than "
            f"{MAX_BYTES} bytes")


class _TreeBuilder(ContentHandler):
    """Builds `Node`s; keeps the start tag's line for each element."""

    def __init__(self, filename: str) -> None:
        super().__init__()
        self.filename = filename
        self.locator: Locator | None = None
        self.stack: list[Node] = []
        self.root: Node | None = None
        self._text: list[list[str]] = []
        self.count = 0

    def setDocumentLocator(self, locator: Locator) -> None:  # noqa: N802 - SAX API
        self.locator = locator

    def line(self) -> int:
        return int(self.locator.getLineNumber() or 0) if self.locator is not None else 0

    def startElementNS(  # noqa: N802 - SAX API
        self, name: tuple[str | None, str], qname: str | None, attrs: AttributesNSImpl
    ) -> None:
        ns, tag = name
        self.count += 1 + len(attrs)
        if len(self.stack) >= MAX_DEPTH:
            raise _TooLarge(f"elements are nested more than {MAX_DEPTH} deep (at <{tag}>); "
                            f"RelayMQ refuses XML nested deeper than {MAX_DEPTH} levels")
        if self.count > MAX_NODES:
            raise _TooLarge(f"the document has more than {MAX_NODES} elements and attributes; "
                            "RelayMQ refuses larger XML configs")
        attributes = {local: value for (_attr_ns, local), value in attrs.items()}
        node = Node(tag, ns or "", attributes, origin=Origin(self.filename, self.line()))
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.root = node
        self.stack.append(node)
        self._text.append([])

    def endElementNS(self, name: tuple[str | None, str], qname: str | None) -> None:  # noqa: N802
        node = self.stack.pop()
        node.text = "".join(self._text.pop()).strip()

    def characters(self, content: str) -> None:
        if self._text:
            self._text[-1].append(content)


def parse_xml(data: str | bytes, filename: str = "<text>") -> Node:
    """Parse ``data`` and return the root element.

    :raises ConfigError: malformed XML (with file:line), or a document that declares
        entities or references external resources, which RelayMQ refuses outright.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{filename}: {too_large_message(len(raw))}")
    handler = _TreeBuilder(filename)
    parser = defusedxml.sax.make_parser()
    parser.setFeature(feature_namespaces, True)
    parser.setContentHandler(handler)
    try:
        parser.parse(io.BytesIO(raw))
    except _TooLarge as exc:
        raise ConfigError(f"{filename}:{handler.line()}: {exc}") from None
    except SAXParseException as exc:
        raise ConfigError(
            f"{filename}:{exc.getLineNumber()}: not well-formed XML: {exc.getMessage()}"
        ) from exc
    except EntitiesForbidden as exc:
        what = f"an external entity ({exc.sysid})" if exc.sysid else "an entity"
        raise ConfigError(
            f"{filename}:{handler.line()}: the document declares {what} '{exc.name}'; RelayMQ "
            "refuses XML entity declarations (they enable XXE and billion-laughs attacks). "
            "Use ${property} substitution instead"
        ) from exc
    except DefusedXmlException as exc:
        raise ConfigError(
            f"{filename}:{handler.line()}: refused unsafe XML ({exc}); RelayMQ does not load "
            "external resources from a config file"
        ) from exc
    if handler.root is None:  # pragma: no cover - expat reports "no element found" first
        raise ConfigError(f"{filename}: the document has no root element")
    return handler.root
