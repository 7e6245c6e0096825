"""Property tests: total functions, and compiled code agrees with a reference evaluator.

* Any string either compiles or raises InvalidSelector; nothing else escapes.
* A compiled selector never raises from ``evaluate``/``matches`` whatever the
  field values, and ``matches`` is exactly ``evaluate(...) is True``.
* On randomly generated selectors and fields, the generated code (with all
  its inlined fast paths) agrees with a slow, independently written
  tree-walking evaluator of the JMS rules below.
"""

from __future__ import annotations

import math
import operator
import re
import struct
import warnings
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from relaymq.model.jtypes import Float32, Int32
from relaymq.selector import InvalidSelector, Selector
from relaymq.selector import nodes as n
from relaymq.selector.functions import java_string
from relaymq.selector.parser import parse

IDENTS = ["a", "b", "s", "t", "n", "m", "flag", "JMSPriority"]

field_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-5, max_value=5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, 2.0, 1e308]),
    st.integers(min_value=-(2**31), max_value=2**31 - 1).map(Int32),
    st.sampled_from([2**31 - 1, -(2**31), 16777217, 7, -3]).map(Int32),
    st.floats(width=32).map(Float32),
    st.sampled_from([16777216.0, 1.100000023841858, 0.5]).map(Float32),
    st.text(alphabet="ab_%!,.1 5eE-+xX", max_size=6),
    st.sampled_from(["true", "FALSE", "7", "-2.5", "1e3", "0x1F", "", "a,b,,"]),
)
fields_strategy = st.dictionaries(st.sampled_from(IDENTS), field_values, max_size=len(IDENTS))


# --------------------------------------------------------------------------
# Reference evaluator: deliberately naive, written from the rules in
# docs/selectors.md rather than from the compiler.

_ORDER = {"<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge}
_INT, _LONG, _FLOAT, _DOUBLE = "int", "long", "float", "double"
_NUMS = (_INT, _LONG, _FLOAT, _DOUBLE)


def _f32(x: float) -> float:
    """Round to a Java float (the reference does it through Fraction, not jtypes)."""
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return float(struct.unpack("<f", struct.pack("<f", float(Fraction(x))))[0])
    except OverflowError:
        return math.copysign(math.inf, x)


def _f32_of_int(v: int) -> float:
    # exact rounding of an integer to 24 significant bits, half to even
    if v == 0:
        return 0.0
    m = abs(v)
    shift = max(m.bit_length() - 24, 0)
    q = Fraction(m, 2**shift)
    r = round(q)  # Python rounds half to even
    return math.copysign(float(r * 2**shift), v)


def _kind(v: object) -> str:
    """The Java class of a value: int/long/float/double, bool, str, null or other."""
    if v is None:
        return "null"
    if type(v) is bool:
        return "bool"
    if type(v) is Int32:
        return _INT if -(2**31) <= v < 2**31 else _LONG  # type: ignore[operator]
    if type(v) is int:
        return _LONG
    if type(v) is Float32:
        return _FLOAT
    if type(v) is float:
        return _DOUBLE
    if type(v) is str:
        return "str"
    return "other"


def _parse_as(text: str, kind: str) -> Any:
    if kind in (_INT, _LONG):
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            return None
        v = int(text)
        bits = 32 if kind == _INT else 64
        return v if -(2 ** (bits - 1)) <= v < 2 ** (bits - 1) else None
    if kind in (_FLOAT, _DOUBLE):
        t = text.strip(" ")
        m = re.fullmatch(
            r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?", t
        )
        if not m:
            return None
        d = float(t.rstrip("fFdD").replace("Infinity", "inf"))
        return _f32(d) if kind == _FLOAT else d
    if kind == "bool":
        return text.lower() == "true"
    return None


def _as(v: Any, kind: str) -> Any:
    if kind == _DOUBLE:
        return float(v)
    if kind == _FLOAT:
        return _f32(v) if isinstance(v, float) else _f32_of_int(v)
    return int(v)


def ref_compare(op: str, a: Any, b: Any, convert: bool) -> bool | None:
    ka, kb = _kind(a), _kind(b)
    if "null" in (ka, kb):
        return None
    if ka in _NUMS and kb in _NUMS:
        if _DOUBLE in (ka, kb):
            target = _DOUBLE
        elif _FLOAT in (ka, kb):
            target = _FLOAT
        else:
            target = _LONG
        a, b, ka, kb = _as(a, target), _as(b, target), "num", "num"
    elif convert and "str" in (ka, kb) and "other" not in (ka, kb) and ka != kb:
        target = kb if ka == "str" else ka
        converted = _parse_as(a if ka == "str" else b, target)
        if converted is None:
            return False
        if ka == "str":
            a = converted
        else:
            b = converted
        ka = kb = "num" if target in _NUMS else target
    if "other" in (ka, kb) or ka != kb:
        return False
    if op == "=":
        return a == b
    if op == "<>":
        return a != b
    if ka != "num":
        return None
    return _ORDER[op](a, b)


def _wrap(v: int, bits: int) -> int:
    return (v + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)


def _long(v: int) -> int:
    return _wrap(v, 64)


def ref_arith(op: str, a: Any, b: Any) -> Any:
    ka, kb = _kind(a), _kind(b)
    if op == "+" and ka == "str" and kb == "str":
        return a + b
    if ka not in _NUMS or kb not in _NUMS:
        return None
    if ka in (_INT, _LONG) and kb in (_INT, _LONG):
        bits = 32 if ka == kb == _INT else 64
        a, b = int(a), int(b)
        if op in "/%" and b == 0:
            return None
        if op == "/":
            r = _wrap(math.trunc(Fraction(a, b)), bits)
        elif op == "%":
            r = _wrap(a - b * math.trunc(Fraction(a, b)), bits)
        else:
            r = _wrap({"+": operator.add, "-": operator.sub, "*": operator.mul}[op](a, b), bits)
        return Int32(r) if bits == 32 else r
    try:
        x, y = float(a), float(b)
    except OverflowError:
        return None
    if op in "/%" and y == 0:
        return None
    if op == "%":
        return math.nan if math.isinf(x) else math.fmod(x, y)
    ops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
    try:
        return ops[op](x, y)
    except OverflowError:
        return None


def ref_like(text: str, pattern: str, escape: str | None) -> bool:
    regex = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape and i + 1 < len(pattern) and pattern[i + 1] in ("%", "_", escape):
            regex.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        regex.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.fullmatch("".join(regex), text, re.DOTALL) is not None


def _and(a: Any, b: Any) -> Any:
    return False if False in (a, b) else None if None in (a, b) else True


def _or(a: Any, b: Any) -> Any:
    return True if True in (a, b) else None if None in (a, b) else False


def ref_cond(node: n.Node, fields: dict[str, Any], convert: bool) -> bool | None:
    v = ref_value(node, fields, convert)
    if type(v) is bool or v is None:
        return v
    return False if convert else None  # STOMP follows ActiveMQ: a non-boolean is FALSE


def ref_value(node: n.Node, fields: dict[str, Any], convert: bool) -> Any:  # noqa: C901
    def val(x: n.Node) -> Any:
        return ref_value(x, fields, convert)

    def cond(x: n.Node) -> Any:
        return ref_cond(x, fields, convert)

    if isinstance(node, n.Literal):
        return node.value
    if isinstance(node, n.Ident):
        return fields.get(node.name)
    if isinstance(node, n.Compare):
        return ref_compare(node.op, val(node.left), val(node.right), convert)
    if isinstance(node, n.Logic):
        acc = cond(node.operands[0])
        for operand in node.operands[1:]:
            acc = (_and if node.op == "AND" else _or)(acc, cond(operand))
        return acc
    if isinstance(node, n.Not):
        c = cond(node.operand)
        return None if c is None else not c
    if isinstance(node, n.Arith):
        return ref_arith(node.op, val(node.left), val(node.right))
    if isinstance(node, n.Unary):
        v = val(node.operand)
        k = _kind(v)
        if k not in _NUMS:
            return None
        if node.op == "+":
            return v
        if k == _INT:
            return Int32(_wrap(-v, 32))
        if k == _LONG:
            return _long(-int(v))
        return Float32(-v) if k == _FLOAT else -v
    if isinstance(node, n.IsNull):
        return (val(node.operand) is None) != node.negated
    if isinstance(node, n.InList):
        v = val(node.operand)
        return None if type(v) is not str else (v in node.values) != node.negated
    if isinstance(node, n.Like):
        v = val(node.operand)
        if type(v) is not str:
            return None
        return ref_like(v, node.pattern, node.escape) != node.negated
    if isinstance(node, n.Between):
        x, lo, hi = val(node.operand), val(node.low), val(node.high)
        if node.negated:
            return _or(ref_compare("<", x, lo, convert), ref_compare(">", x, hi, convert))
        return _and(ref_compare(">=", x, lo, convert), ref_compare("<=", x, hi, convert))
    if isinstance(node, n.Call):
        args = [val(a) for a in node.args]
        if node.name == "REGEX":
            if None in args or None in (java_string(args[0]), java_string(args[1])):
                return None
            try:
                return re.search(java_string(args[0]), java_string(args[1])) is not None  # type: ignore[arg-type]
            except re.error:
                return None  # a pattern from a message that does not compile is UNKNOWN
        if node.name == "MAKELIST":
            return args
        if node.name == "SPLIT":
            text, sep = args[0], args[1]
            if type(text) is not str or type(sep) is not str:
                return None
            parts = re.split(re.escape(sep), text) if sep == "," else None
            assert parts is not None  # the generator only splits on ','
            if parts == [""] and text == "":
                return [""]
            while parts and parts[-1] == "":
                parts.pop()
            return parts if text else [""]
        if node.name == "INLIST":
            items, value = args
            if value is None or type(items) is not list:
                return None
            return any(ref_compare("=", item, value, convert) is True for item in items)
    raise AssertionError(node)


# --------------------------------------------------------------------------
# Random selectors, mostly well-typed so they compile.

ident = st.sampled_from(IDENTS)
num_literal = st.one_of(
    st.integers(min_value=-10, max_value=10).map(str),
    st.sampled_from(
        [
            "0",
            "2.5",
            "1E3",
            "0x1F",
            "017",
            "9223372036854775807",
            ".5",
            "1.5F",
            "1.1F",
            "1.1",
            "2147483647",
            "2147483648",
            "16777217",
            "7L",
            "9007199254740993",
        ]
    ),
)
str_literal = st.text(alphabet="ab_%!,'1 .", max_size=5).map(
    lambda s: "'" + s.replace("'", "''") + "'"
)
like_pattern = st.text(alphabet="ab_%!.*[\\", max_size=6).map(lambda s: "'" + s + "'")


def _num_expr(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(["+", "-", "*", "/", "%"]), children).map(
            lambda t: f"{t[0]} {t[1]} {t[2]}"
        ),
        children.map(lambda c: f"-{c}" if not c.startswith("-") else f"-({c})"),
        children.map(lambda c: f"({c})"),
    )


num_expr = st.recursive(st.one_of(ident, num_literal), _num_expr, max_leaves=4)
str_expr = st.one_of(
    ident, str_literal, st.tuples(ident, str_literal).map(lambda t: f"{t[0]} + {t[1]}")
)

comparison_ops = st.sampled_from(["=", "<>", "<", ">", "<=", ">="])
equality_ops = st.sampled_from(["=", "<>"])

atom_cond = st.one_of(
    st.tuples(num_expr, comparison_ops, num_expr).map(" ".join),
    st.tuples(str_expr, equality_ops, str_expr).map(" ".join),
    st.tuples(ident, equality_ops, st.sampled_from(["TRUE", "FALSE", "'true'", "1"])).map(" ".join),
    st.tuples(ident, comparison_ops, ident).map(" ".join),
    st.tuples(num_expr, st.sampled_from(["", "NOT "]), num_expr, num_expr).map(
        lambda t: f"{t[0]} {t[1]}BETWEEN {t[2]} AND {t[3]}"
    ),
    st.tuples(
        str_expr, st.sampled_from(["", "NOT "]), like_pattern, st.sampled_from(["", "!", "%", "_"])
    ).map(lambda t: f"{t[0]} {t[1]}LIKE {t[2]}" + (f" ESCAPE '{t[3]}'" if t[3] else "")),
    st.tuples(
        ident, st.sampled_from(["", "NOT "]), st.lists(str_literal, min_size=1, max_size=4)
    ).map(lambda t: f"{t[0]} {t[1]}IN ({', '.join(t[2])})"),
    st.tuples(num_expr, st.sampled_from(["IS NULL", "IS NOT NULL"])).map(" ".join),
    ident,
    st.sampled_from(["TRUE", "FALSE"]),
    st.tuples(st.sampled_from(["'a'", "'^[0-9]+$'", "'b|1'", "s"]), ident).map(
        lambda t: f"REGEX({t[0]}, {t[1]})"
    ),
    st.tuples(st.lists(st.one_of(str_literal, num_literal, ident), max_size=3), ident).map(
        lambda t: f"INLIST(MAKELIST({', '.join(t[0])}), {t[1]})"
    ),
    st.tuples(ident, str_literal).map(lambda t: f"INLIST(SPLIT({t[0]}, ','), {t[1]})"),
)


def _cond(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, st.sampled_from(["AND", "OR"]), children).map(" ".join),
        children.map(lambda c: f"NOT {c}"),
        children.map(lambda c: f"({c})"),
    )


selector_text = st.recursive(atom_cond, _cond, max_leaves=6)

TOKENS = [
    "a", "b", "s", "=", "<>", "<", ">=", "+", "-", "*", "/", "%", "(", ")", ",", "'x'", "''",
    "'", "1", "2.5", "0x1F", "1E3", "AND", "OR", "NOT", "BETWEEN", "LIKE", "IN", "IS", "NULL",
    "ESCAPE", "TRUE", "FALSE", "REGEX", "INLIST", "SPLIT", "MAKELIST", "--", "/*", "*/", "\n",
]  # fmt: skip
token_soup = st.lists(st.sampled_from(TOKENS), max_size=12).map(" ".join)


def _compile(text: str, convert: bool = False) -> Selector | None:
    # Generated code must compile cleanly: a SyntaxWarning (say, "is" with a
    # literal) becomes an error here and would surface as "too complex".
    with warnings.catch_warnings():
        warnings.simplefilter("error", SyntaxWarning)
        try:
            return Selector(text, string_conversion=convert)
        except InvalidSelector as exc:
            assert 0 <= exc.offset <= len(text)
            assert "too complex" not in exc.reason, exc
            return None


# --------------------------------------------------------------------------
# Properties.


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40))
def test_any_text_compiles_or_raises_invalid_selector(text: str) -> None:
    _compile(text)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="ab'()=<>+-*/%., 0123456789xXeEfFlL_$\\\n!#NOTANDORINLIKEISU", max_size=30))
def test_selector_alphabet_text_compiles_or_raises_invalid_selector(text: str) -> None:
    _compile(text)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(token_soup, fields_strategy, st.booleans())
def test_token_soup_compiles_or_raises_and_never_raises_on_evaluate(
    text: str, fields: dict[str, Any], convert: bool
) -> None:
    sel = _compile(text, convert)
    if sel is not None:
        result = sel.evaluate(fields)
        assert result in (True, False, None)
        assert sel.matches(fields) is (result is True)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(selector_text, fields_strategy, st.booleans())
def test_compiled_code_agrees_with_reference_evaluator(
    text: str, fields: dict[str, Any], convert: bool
) -> None:
    sel = _compile(text, convert)
    assume(sel is not None)
    assert sel is not None
    result = sel.evaluate(fields)
    assert sel.matches(fields) is (result is True)
    tree = parse(text)
    assert tree is not None
    expected = ref_cond(tree, fields, convert)
    assert result is expected, (text, fields, sel.source)


@settings(max_examples=300, deadline=None)
@given(selector_text)
def test_generated_selectors_mostly_compile(text: str) -> None:
    # Guard against the generator drifting into mostly-invalid output, which
    # would make the agreement property above vacuous.
    sel = _compile(text)
    if sel is None:
        return
    assert sel.text == text


def test_generator_yield_is_high() -> None:
    compiled = 0
    examples = []

    @settings(max_examples=300, database=None, deadline=None)
    @given(selector_text)
    def collect(text: str) -> None:
        examples.append(text)

    collect()
    compiled = sum(1 for t in examples if _compile(t) is not None)
    assert compiled >= len(examples) * 0.6, (compiled, len(examples))


@settings(max_examples=1500, deadline=None)
@given(
    st.text(alphabet="ab_%!.*+?[](){}^$|\\", max_size=8),
    st.sampled_from([None, "!", "\\", "%", "_", "a", "."]),
    st.text(alphabet="ab_%!.*+?[](){}^$|\\\n", max_size=10),
)
def test_like_matches_reference(pattern: str, escape: str | None, value: str) -> None:
    quoted = pattern.replace("'", "''")
    clause = f"v LIKE '{quoted}'" + (f" ESCAPE '{escape}'" if escape else "")
    sel = Selector.compile(clause)
    assert sel.evaluate({"v": value}) is ref_like(value, pattern, escape)
    negated = Selector.compile(clause.replace(" LIKE ", " NOT LIKE "))
    assert negated.evaluate({"v": value}) is (not ref_like(value, pattern, escape))
