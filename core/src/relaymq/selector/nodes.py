"""Syntax tree for parsed selectors, annotated with static value kinds.

The parser records, for every node, the set of value kinds it can produce.
That lets RelayMQ reject selectors such as ``'abc' < 'abd'`` or ``3 + 5`` when
the consumer subscribes (as the JMS specification requires) instead of
silently never matching, and lets the compiler pick fast paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntFlag


class VKind(IntFlag):
    """Static value kinds; a node's ``kinds`` is the union of what it may yield.

    Any expression may also yield NULL (unknown); that is not tracked here.
    """

    BOOL = 1
    NUM = 2
    STR = 4
    LIST = 8  # only produced by the SPLIT/MAKELIST extension functions

    @classmethod
    def any_scalar(cls) -> VKind:
        """What an identifier may hold: any JMS property type."""
        return cls.BOOL | cls.NUM | cls.STR


def describe_kinds(kinds: VKind) -> str:
    """Name a kind set for error messages ("a string", "a number or a string")."""
    names = []
    if kinds & VKind.BOOL:
        names.append("a boolean")
    if kinds & VKind.NUM:
        names.append("a number")
    if kinds & VKind.STR:
        names.append("a string")
    if kinds & VKind.LIST:
        names.append("a list")
    return " or ".join(names) or "nothing"


@dataclass(slots=True, eq=False)
class Node:
    """Base node: ``pos`` is the offset of the node's first character in the text."""

    pos: int
    kinds: VKind = field(init=False, default=VKind(0))
    depth: int = field(init=False, default=1)


@dataclass(slots=True, eq=False)
class Literal(Node):
    """A string, exact (int), approximate (float) or boolean literal."""

    value: str | int | float | bool


@dataclass(slots=True, eq=False)
class Ident(Node):
    """A header field or property reference; resolved with ``fields.get(name)``."""

    name: str


@dataclass(slots=True, eq=False)
class Unary(Node):
    """Unary ``+`` or ``-`` on a numeric expression."""

    op: str
    operand: Node


@dataclass(slots=True, eq=False)
class Arith(Node):
    """Binary ``+ - * / %``; ``+`` also concatenates strings (ActiveMQ extension)."""

    op: str
    left: Node
    right: Node


@dataclass(slots=True, eq=False)
class Compare(Node):
    """``= <> < > <= >=``."""

    op: str
    left: Node
    right: Node


@dataclass(slots=True, eq=False)
class Between(Node):
    """``operand [NOT] BETWEEN low AND high``."""

    operand: Node
    low: Node
    high: Node
    negated: bool


@dataclass(slots=True, eq=False)
class Like(Node):
    """``operand [NOT] LIKE 'pattern' [ESCAPE 'c']``."""

    operand: Node
    pattern: str
    escape: str | None
    negated: bool


@dataclass(slots=True, eq=False)
class InList(Node):
    """``operand [NOT] IN ('a', 'b', ...)``."""

    operand: Node
    values: tuple[str, ...]
    negated: bool


@dataclass(slots=True, eq=False)
class IsNull(Node):
    """``operand IS [NOT] NULL``."""

    operand: Node
    negated: bool


@dataclass(slots=True, eq=False)
class Not(Node):
    """Three-valued NOT."""

    operand: Node


@dataclass(slots=True, eq=False)
class Logic(Node):
    """Flattened n-ary AND / OR (both are associative in three-valued logic)."""

    op: str
    operands: list[Node]


@dataclass(slots=True, eq=False)
class Call(Node):
    """An ActiveMQ extension function call such as ``REGEX(pattern, value)``."""

    name: str
    args: list[Node]
    #: Offsets of each argument, for errors raised while compiling literals.
    arg_pos: list[int] = field(default_factory=list)


def children(node: Node) -> list[Node]:
    """Direct sub-expressions, for generic walks (depth, identifier collection)."""
    if isinstance(node, Unary | Not | IsNull | Like | InList):
        return [node.operand]
    if isinstance(node, Arith | Compare):
        return [node.left, node.right]
    if isinstance(node, Between):
        return [node.operand, node.low, node.high]
    if isinstance(node, Logic):
        return list(node.operands)
    if isinstance(node, Call):
        return list(node.args)
    return []


def identifiers(node: Node) -> frozenset[str]:
    """All identifier names referenced by a tree (iterative: trees may be wide)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Ident):
            names.add(current.name)
        stack.extend(children(current))
    return frozenset(names)
