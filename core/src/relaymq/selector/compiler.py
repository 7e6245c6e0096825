"""Compile a checked selector tree into a Python function.

The dispatch loop evaluates every selector against every candidate message,
so RelayMQ compiles each selector once into straight-line Python (one
expression, no interpretation per message). Safety rules for the generated
source:

* It is built only from this module's own templates. Identifier names, string
  literals, LIKE patterns and IN lists never appear in the source: they are
  bound as closure variables (``_c0``, ``_c1``, ...) of a factory function.
  Only numbers this module produced itself (``repr`` of an ``int``/``float``)
  are written inline.
* Message fields are read exclusively through ``fields.get(name)``, which the
  kernel's lazy message view implements.
* The code runs with a builtins table holding only ``type``, ``len``, ``str``
  and ``bool``.

Common shapes are inlined (property vs literal comparison, BETWEEN with
literal bounds, LIKE prefix/suffix/contains, IN) with a fallback call into
:mod:`relaymq.selector.runtime`, which defines the semantics for every other
combination of value types.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, Protocol, cast

from relaymq.model import jtypes
from relaymq.selector import functions, runtime
from relaymq.selector.errors import InvalidSelector
from relaymq.selector.like import plan_like
from relaymq.selector.nodes import (
    Arith,
    Between,
    Call,
    Compare,
    Ident,
    InList,
    IsNull,
    Like,
    Literal,
    Logic,
    Node,
    Not,
    Unary,
    identifiers,
)


class FieldSource(Protocol):
    """What a selector reads: a dict, or the kernel's lazy `SelectorView`."""

    def get(self, name: str, default: Any = None, /) -> Any: ...


Evaluator = Callable[[FieldSource], "bool | None"]

_PY_OPS: Final = {"=": "==", "<>": "!=", "<": "<", ">": ">", "<=": "<=", ">=": ">="}
_MIRRORED: Final = {"=": "=", "<>": "<>", "<": ">", ">": "<", "<=": ">=", ">=": "<="}
_SAFE_BUILTINS: Final = {"type": type, "len": len, "str": str, "bool": bool}
#: Integers up to this magnitude are exact as Java floats (24-bit significand).
_FLOAT_EXACT: Final = 2**24


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fast_types(lit: object) -> set[type]:
    """Field types for which Python's comparison with ``lit`` equals Java's promoted one.

    The sets are live (`relaymq.model.jtypes`): transports register their
    int/float subclasses there. Other values take the runtime's slow path.
    """
    code = jtypes.jclass(lit)
    if code == jtypes.I32 or code == jtypes.I64:
        # an int or long compared with a float field is rounded to a float first
        small = abs(int(cast(int, lit))) <= _FLOAT_EXACT
        return jtypes.NUMERIC_TYPES if small else jtypes.INT_TYPES
    if code == jtypes.F64:
        # a long field is rounded to a double first; ints are exact
        return jtypes.FLOAT_OR_I32_TYPES
    return jtypes.FLOAT_TYPES  # a float literal: int and long fields are rounded to a float


def compile_tree(
    root: Node | None, text: str, string_conversion: bool
) -> tuple[Evaluator, Callable[[FieldSource], bool], str]:
    """Return ``(evaluate, matches, source)`` for a parsed selector.

    ``root`` None is the empty selector, which matches every message (JMS:
    an empty selector is the same as no selector).
    """
    comparisons = runtime.CONVERTING if string_conversion else runtime.STRICT
    gen = _CodeGen(comparisons, text)
    if root is None:
        expr = "True"
        uses_fields = False
    else:
        expr = gen.cond(root)
        uses_fields = bool(identifiers(root))
    if expr in ("True", "False", "None"):
        match_expr = "True" if expr == "True" else "False"
    else:
        match_expr = f"{expr} is True"
    prologue = "        _get = fields.get\n" if uses_fields else ""
    params = ", ".join(gen.bindings)
    source = (
        f"def _factory({params}):\n"
        f"    def evaluate(fields):\n{prologue}        return {expr}\n"
        f"    def matches(fields):\n{prologue}        return {match_expr}\n"
        f"    return evaluate, matches\n"
    )
    try:
        code = compile(source, "<relaymq-selector>", "exec")
        namespace: dict[str, Any] = {"__builtins__": _SAFE_BUILTINS}
        exec(code, namespace)  # noqa: S102 - source is generated from our own templates only
    except (SyntaxError, RecursionError, ValueError, OverflowError) as exc:
        raise InvalidSelector(f"selector is too complex to compile ({exc})", 0, text) from None
    evaluate, matches = namespace["_factory"](*gen.bindings.values())
    return evaluate, matches, source


class _CodeGen:
    """Emits one Python expression per node; every result is atomic (safe to nest)."""

    def __init__(self, comparisons: runtime.Comparisons, text: str) -> None:
        self.cmp = comparisons
        self.text = text
        self.bindings: dict[str, object] = {}
        self._by_key: dict[tuple[object, ...], str] = {}
        self._temps = 0
        #: Inline constant sources (numbers, True/False/None) emitted so far.
        self.constant_codes: set[str] = set()
        self.string_conversion = comparisons.string_conversion

    # ------------------------------------------------------------ bookkeeping

    def bind_value(self, value: object) -> str:
        """Bind a literal value (deduplicated by type and value)."""
        key = ("v", type(value), value)
        name = self._by_key.get(key)
        if name is None:
            name = f"_c{len(self.bindings)}"
            self._by_key[key] = name
            self.bindings[name] = value
        return name

    def bind_object(self, obj: object) -> str:
        """Bind a helper function or compiled matcher (deduplicated by identity)."""
        key = ("o", id(obj))
        name = self._by_key.get(key)
        if name is None:
            name = f"_c{len(self.bindings)}"
            self._by_key[key] = name
            self.bindings[name] = obj
        return name

    def temp(self) -> str:
        self._temps += 1
        return f"_t{self._temps}"

    def literal(self, value: object) -> str:
        """Source for a constant; strings are bound, never spliced."""
        if value is None or type(value) is bool:
            text = repr(value)
        elif type(value) is int or (type(value) is float and math.isfinite(value)):
            text = repr(value)
            if text.startswith("-"):
                text = f"({text})"
        else:
            return self.bind_value(value)
        self.constant_codes.add(text)
        return text

    # ------------------------------------------------------------ dispatch

    def cond(self, node: Node) -> str:
        """Code yielding True/False/None for a node used as a condition."""
        if isinstance(node, Ident):
            t = self.temp()
            if self.string_conversion:
                # ActiveMQ (STOMP): a value that is not a boolean is FALSE, NULL stays UNKNOWN
                return (
                    f"({t} if type({t} := {self.value(node)}) is bool else ({t} is None and None))"
                )
            return f"({t} if type({t} := {self.value(node)}) is bool else None)"
        return self.value(node)

    def value(self, node: Node) -> str:
        """Code yielding the node's value (None for NULL/unknown)."""
        if isinstance(node, Literal):
            return self.literal(node.value)
        if isinstance(node, Ident):
            return f"_get({self.bind_value(node.name)})"
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, Logic):
            return self.logic(node)
        if isinstance(node, Not):
            t = self.temp()
            return f"(None if ({t} := {self.cond(node.operand)}) is None else not {t})"
        if isinstance(node, Arith):
            return self.arith(node)
        if isinstance(node, Unary):
            helper = runtime.neg if node.op == "-" else runtime.pos
            return f"{self.bind_object(helper)}({self.value(node.operand)})"
        if isinstance(node, IsNull):
            operand = self.value(node.operand)
            if operand in self.constant_codes:  # e.g. "5 IS NULL", "(1 + 2) IS NULL"
                return repr((operand == "None") != node.negated)
            test = "is not None" if node.negated else "is None"
            return f"({operand} {test})"
        if isinstance(node, InList):
            return self.in_list(node)
        if isinstance(node, Like):
            return self.like(node)
        if isinstance(node, Between):
            return self.between(node)
        if isinstance(node, Call):
            return self.call(node)
        raise AssertionError(f"unhandled node {type(node).__name__}")  # pragma: no cover

    # ------------------------------------------------------------ operators

    def compare(self, node: Compare) -> str:
        op, left, right = node.op, node.left, node.right
        if isinstance(left, Literal) and isinstance(right, Literal):
            return self.literal(self.cmp.by_op[op](left.value, right.value))
        if isinstance(left, Literal):
            left, right, op = right, left, _MIRRORED[op]
        slow = self.bind_object(self.cmp.by_op[op])
        if not isinstance(right, Literal):
            return f"{slow}({self.value(left)}, {self.value(right)})"
        lit = right.value
        c = self.literal(lit)
        t = self.temp()
        if type(lit) is str:
            test = f"type({t} := {self.value(left)}) is str"
        elif type(lit) is bool:
            test = f"type({t} := {self.value(left)}) is bool"
        else:
            fast = self.bind_object(_fast_types(lit))
            test = f"type({t} := {self.value(left)}) in {fast}"
        return f"({t} {_PY_OPS[op]} {c} if {test} else {slow}({t}, {c}))"

    def logic(self, node: Logic) -> str:
        temps = [self.temp() for _ in node.operands]
        codes = [self.cond(operand) for operand in node.operands]
        if node.op == "AND":
            short = " or ".join(f"({t} := {c}) is False" for t, c in zip(temps, codes, strict=True))
            all_true = " and ".join(temps)
            return f"(False if {short} else (True if {all_true} else None))"
        short = " or ".join(f"({t} := {c}) is True" for t, c in zip(temps, codes, strict=True))
        any_unknown = " or ".join(f"{t} is None" for t in temps)
        return f"(True if {short} else (None if {any_unknown} else False))"

    def arith(self, node: Arith) -> str:
        helper = runtime.ARITHMETIC[node.op]
        if isinstance(node.left, Literal) and isinstance(node.right, Literal):
            return self.literal(helper(node.left.value, node.right.value))
        left = self.value(node.left)
        right = self.value(node.right)
        return f"{self.bind_object(helper)}({left}, {right})"

    def between(self, node: Between) -> str:
        operand = self.value(node.operand)
        low, high = node.low, node.high
        slow_fn = self.cmp.not_between if node.negated else self.cmp.between
        slow = self.bind_object(slow_fn)
        if (
            isinstance(low, Literal)
            and isinstance(high, Literal)
            and _is_number(low.value)
            and _is_number(high.value)
        ):
            low_types = _fast_types(low.value)
            high_types = _fast_types(high.value)
            fast_types = None
            if low_types is high_types or high_types is jtypes.NUMERIC_TYPES:
                fast_types = low_types
            elif low_types is jtypes.NUMERIC_TYPES:
                fast_types = high_types
            if fast_types is not None:
                lo = self.literal(low.value)
                hi = self.literal(high.value)
                t = self.temp()
                if node.negated:
                    fast = f"({t} < {lo} or {t} > {hi})"
                else:
                    fast = f"({lo} <= {t} <= {hi})"
                test = f"type({t} := {operand}) in {self.bind_object(fast_types)}"
                return f"({fast} if {test} else {slow}({t}, {lo}, {hi}))"
        return f"{slow}({operand}, {self.value(low)}, {self.value(high)})"

    def like(self, node: Like) -> str:
        plan = plan_like(node.pattern, node.escape)
        t = self.temp()
        if plan.kind == "equals":
            test = f"{t} == {self.bind_value(plan.text)}"
        elif plan.kind == "prefix":
            test = f"{t}.startswith({self.bind_value(plan.text)})"
        elif plan.kind == "suffix":
            test = f"{t}.endswith({self.bind_value(plan.text)})"
        elif plan.kind == "contains":
            test = f"{self.bind_value(plan.text)} in {t}"
        elif plan.kind == "affixes":
            prefix = self.bind_value(plan.text)
            suffix = self.bind_value(plan.suffix)
            minimum = len(plan.text) + len(plan.suffix)
            test = (
                f"(len({t}) >= {minimum} and {t}.startswith({prefix}) and {t}.endswith({suffix}))"
            )
        elif plan.kind == "any":
            test = "True"
        elif plan.kind == "length":
            test = f"len({t}) == {plan.length}"
        elif plan.kind == "regex":
            test = f"{self.bind_object(plan.matcher)}({t}) is not None"
        else:
            test = f"{self.bind_object(plan.matcher)}({t})"
        if node.negated:
            test = f"not {test}" if test != "True" else "False"
        return f"({test} if type({t} := {self.value(node.operand)}) is str else None)"

    def in_list(self, node: InList) -> str:
        members = self.bind_value(frozenset(node.values))
        t = self.temp()
        test = "not in" if node.negated else "in"
        return f"({t} {test} {members} if type({t} := {self.value(node.operand)}) is str else None)"

    def call(self, node: Call) -> str:
        args = node.args
        if node.name == "REGEX":
            pattern = args[0]
            if isinstance(pattern, Literal) and type(pattern.value) is str:
                compiled = self._literal_pattern(pattern.value, node.arg_pos[0])
                matcher = self.bind_object(functions.make_regex_literal(compiled))
                return f"{matcher}({self.value(args[1])})"
            helper = self.bind_object(functions.regex_dynamic)
            return f"{helper}({self.value(args[0])}, {self.value(args[1])})"
        if node.name == "INLIST":
            helper = self.bind_object(functions.make_inlist(self.cmp))
            return f"{helper}({self.value(args[0])}, {self.value(args[1])})"
        if node.name == "SPLIT":
            separator = args[1]
            if isinstance(separator, Literal) and type(separator.value) is str:
                self._literal_pattern(separator.value, node.arg_pos[1])
            helper = self.bind_object(functions.split)
            return f"{helper}({', '.join(self.value(a) for a in args)})"
        if node.name == "MAKELIST":
            return f"[{', '.join(self.value(a) for a in args)}]"
        raise AssertionError(f"unhandled function {node.name}")  # pragma: no cover

    def _literal_pattern(self, pattern: str, pos: int) -> Any:
        try:
            return functions.compile_pattern(pattern)
        except functions.PatternError as exc:
            raise InvalidSelector(f"invalid regular expression ({exc})", pos, self.text) from None
