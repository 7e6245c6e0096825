"""Does a selector use ``LIKE`` with a wildcard? (``ignoreWildcardSelectors``)

ActiveMQ answers with a regular expression over the selector text; RelayMQ
walks the parsed selector instead, so a ``LIKE`` inside a string literal or an
escaped ``\\%`` is not mistaken for a wildcard.
"""

from __future__ import annotations

import dataclasses

from relaymq.selector import InvalidSelector
from relaymq.selector.nodes import Like, Node
from relaymq.selector.parser import parse


def has_like_wildcards(text: str) -> bool:
    """True when `text` has a ``LIKE`` pattern with an unescaped ``%`` or ``_``."""
    try:
        tree = parse(text)
    except (InvalidSelector, RecursionError):
        return False
    return tree is not None and any(_wild(n) for n in _walk(tree))


def _wild(node: Node) -> bool:
    if not isinstance(node, Like):
        return False
    pattern, escape = node.pattern, node.escape
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape:
            i += 2  # the escaped character is literal
            continue
        if ch in "%_":
            return True
        i += 1
    return False


def _walk(node: Node) -> list[Node]:
    out = [node]
    stack = [node]
    while stack:
        current = stack.pop()
        for f in dataclasses.fields(current):
            value = getattr(current, f.name)
            children = value if isinstance(value, list | tuple) else [value]
            for child in children:
                if isinstance(child, Node):
                    out.append(child)
                    stack.append(child)
    return out
