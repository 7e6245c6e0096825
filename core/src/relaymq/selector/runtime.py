"""Value semantics used by compiled selectors: comparisons, arithmetic, NULL.

Compiled selector code inlines the common cases (a property compared with a
literal of the same kind) and calls these helpers for everything else. The
helpers therefore define the semantics for *all* inputs, and must never raise:
a selector runs inside the dispatch loop on values chosen by producers.

Conventions: SQL NULL / UNKNOWN is ``None``; booleans are ``True``/``False``;
numbers carry their Java class (`relaymq.model.jtypes`): a plain ``int`` is a
long, ``Int32`` an int, a plain ``float`` a double, ``Float32`` a float.
Values of any other Python type are "unsupported": they compare as non-like to
everything and are unknown to every other operator.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from relaymq.model.jtypes import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    OTHER,
    STR,
    Float32,
    Int32,
    jclass,
    to_float32,
    wrap_int,
    wrap_long,
)
from relaymq.selector.javaparse import NO_VALUE, parse_as

Tri = bool | None
Comparator = Callable[[Any, Any], Tri]

__all__ = ["wrap_long", "wrap_int"]


def java_value(value: Any) -> tuple[int, Any]:
    """(Java class code, value) with out-of-range widths normalized.

    An int-class value outside the int range (an AMQP uint above 2^31-1) is a
    long, as ActiveMQ maps it; a long-class value outside the long range (an
    AMQP ulong above 2^63-1) wraps, as Java's ``longValue()`` does.
    """
    code = jclass(value)
    if code == I32:
        if INT_MIN <= value <= INT_MAX:
            return I32, value
        code = I64
    if code == I64 and not LONG_MIN <= value <= LONG_MAX:
        return I64, wrap_long(int(value))
    return code, value


def _is_num(code: int) -> bool:
    return I32 <= code <= F64


def _promote(ca: int, a: Any, cb: int, b: Any) -> tuple[Any, Any]:
    """Binary numeric promotion for comparisons (ActiveMQ's table, Java's rules).

    double if either is a double; else float if either is a float (an int or
    long is rounded to a float first, so 16777217 equals the float 16777216);
    else exact integers.
    """
    if ca == F64 or cb == F64:
        return float(a), float(b)
    if ca == F32 or cb == F32:
        return to_float32(a), to_float32(b)
    return a, b


# --------------------------------------------------------------------------
# Three-valued logic (used by BETWEEN helpers; AND/OR/NOT are inlined).


def and3(a: Tri, b: Tri) -> Tri:
    """SQL AND: FALSE dominates, then UNKNOWN."""
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def or3(a: Tri, b: Tri) -> Tri:
    """SQL OR: TRUE dominates, then UNKNOWN."""
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def bool_cast(value: object) -> Tri:
    """An identifier used as a condition: only a boolean value is TRUE or FALSE."""
    return value if type(value) is bool else None


# --------------------------------------------------------------------------
# Comparisons.


def _like_values(ca: int, a: Any, cb: int, b: Any, convert: bool) -> tuple[int, Any, Any] | None:
    """Bring two non-NULL operands to one Java class, or None when they are non-like.

    With ``convert`` (STOMP), a string compared with a typed value is parsed
    with that value's class's parser, as ActiveMQ does; a string that does not
    parse makes the comparison FALSE.
    """
    if ca == cb:
        return (ca, a, b) if ca != OTHER else None
    if _is_num(ca) and _is_num(cb):
        a, b = _promote(ca, a, cb, b)
        return (F64 if ca == F64 or cb == F64 else max(ca, cb)), a, b
    if convert:
        if ca == STR and cb != OTHER:
            a = parse_as(a, cb)
            return None if a is NO_VALUE else (cb, a, b)
        if cb == STR and ca != OTHER:
            b = parse_as(b, ca)
            return None if b is NO_VALUE else (ca, a, b)
    return None


class Comparisons:
    """The comparison operators for one string-conversion mode.

    Strict JMS (``string_conversion=False``): comparing values of different
    kinds (string vs number, boolean vs string, ...) is FALSE, any NULL operand
    gives UNKNOWN, and ordering (<, >, <=, >=) strings or booleans gives UNKNOWN
    because JMS only defines = and <> for them. Numbers of different Java
    classes are promoted (see `_promote`).

    With ``string_conversion=True`` a string compared with a number or boolean
    is first converted by that class's Java parser (STOMP headers are strings).
    """

    __slots__ = ("string_conversion", "eq", "ne", "lt", "le", "gt", "ge", "by_op")

    def __init__(self, string_conversion: bool) -> None:
        self.string_conversion = string_conversion
        self.eq = self._make_equality(negate=False)
        self.ne = self._make_equality(negate=True)
        self.lt = self._make_ordering(operator.lt)
        self.le = self._make_ordering(operator.le)
        self.gt = self._make_ordering(operator.gt)
        self.ge = self._make_ordering(operator.ge)
        self.by_op: dict[str, Comparator] = {
            "=": self.eq,
            "<>": self.ne,
            "<": self.lt,
            "<=": self.le,
            ">": self.gt,
            ">=": self.ge,
        }

    def _make_equality(self, negate: bool) -> Comparator:
        convert = self.string_conversion

        def equality(a: Any, b: Any) -> Tri:
            if a is None or b is None:
                return None
            ca, a = java_value(a)
            cb, b = java_value(b)
            like = _like_values(ca, a, cb, b, convert)
            if like is None:
                return False
            _, x, y = like
            return bool(x != y) if negate else bool(x == y)

        return equality

    def _make_ordering(self, op: Callable[[Any, Any], bool]) -> Comparator:
        convert = self.string_conversion

        def ordering(a: Any, b: Any) -> Tri:
            if a is None or b is None:
                return None
            ca, a = java_value(a)
            cb, b = java_value(b)
            like = _like_values(ca, a, cb, b, convert)
            if like is None:
                return False
            code, x, y = like
            if code == STR or code == BOOL:
                return None  # strings and booleans have no order in JMS
            return bool(op(x, y))

        return ordering

    def between(self, value: Any, low: Any, high: Any) -> Tri:
        """``value BETWEEN low AND high`` is ``value >= low AND value <= high``."""
        return and3(self.ge(value, low), self.le(value, high))

    def not_between(self, value: Any, low: Any, high: Any) -> Tri:
        """``value NOT BETWEEN low AND high`` is ``value < low OR value > high``."""
        return or3(self.lt(value, low), self.gt(value, high))


STRICT = Comparisons(string_conversion=False)
CONVERTING = Comparisons(string_conversion=True)


# --------------------------------------------------------------------------
# Arithmetic: ActiveMQ's promotion (int op int is a 32-bit int and wraps, long
# where a long is involved, double where a float or double is); else unknown.


def _arith_class(ca: int, cb: int) -> int:
    if not (_is_num(ca) and _is_num(cb)):
        return OTHER
    if ca >= F32 or cb >= F32:
        return F64
    if ca == I64 or cb == I64:
        return I64
    return I32


def _float_op(op: Callable[[float, float], float], a: Any, b: Any) -> Any:
    try:
        return op(float(a), float(b))
    except OverflowError:
        return None


def add(a: Any, b: Any) -> Any:
    """Numeric addition, or string concatenation when both are strings (ActiveMQ)."""
    if type(a) is int and type(b) is int:
        return wrap_long(a + b)
    ca, a = java_value(a)
    cb, b = java_value(b)
    if ca == STR and cb == STR:
        return str(a) + str(b)
    k = _arith_class(ca, cb)
    if k == I32:
        return Int32(wrap_int(a + b))
    if k == I64:
        return wrap_long(int(a) + int(b))
    if k == F64:
        return _float_op(operator.add, a, b)
    return None


def sub(a: Any, b: Any) -> Any:
    """Numeric subtraction."""
    if type(a) is int and type(b) is int:
        return wrap_long(a - b)
    ca, a = java_value(a)
    cb, b = java_value(b)
    k = _arith_class(ca, cb)
    if k == I32:
        return Int32(wrap_int(a - b))
    if k == I64:
        return wrap_long(int(a) - int(b))
    if k == F64:
        return _float_op(operator.sub, a, b)
    return None


def mul(a: Any, b: Any) -> Any:
    """Numeric multiplication."""
    if type(a) is int and type(b) is int:
        return wrap_long(a * b)
    ca, a = java_value(a)
    cb, b = java_value(b)
    k = _arith_class(ca, cb)
    if k == I32:
        return Int32(wrap_int(a * b))
    if k == I64:
        return wrap_long(int(a) * int(b))
    if k == F64:
        return _float_op(operator.mul, a, b)
    return None


def _truncated(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def div(a: Any, b: Any) -> Any:
    """Division: exact operands truncate toward zero; division by zero is unknown."""
    ca, a = java_value(a)
    cb, b = java_value(b)
    k = _arith_class(ca, cb)
    if k == OTHER or b == 0:
        return None
    if k == I32:
        return Int32(wrap_int(_truncated(int(a), int(b))))
    if k == I64:
        return wrap_long(_truncated(int(a), int(b)))
    try:
        return float(a) / float(b)
    except (OverflowError, ZeroDivisionError):
        return None


def mod(a: Any, b: Any) -> Any:
    """Remainder with the sign of the dividend (Java ``%``, an ActiveMQ extension)."""
    ca, a = java_value(a)
    cb, b = java_value(b)
    k = _arith_class(ca, cb)
    if k == OTHER or b == 0:
        return None
    if k == I32 or k == I64:
        r = abs(int(a)) % abs(int(b))
        r = r if a >= 0 else -r
        return Int32(wrap_int(r)) if k == I32 else wrap_long(r)
    try:
        return math.fmod(float(a), float(b))
    except ValueError:
        return math.nan  # infinite dividend: Java yields NaN
    except OverflowError:
        return None


def neg(a: Any) -> Any:
    """Unary minus; keeps the operand's Java class (-Integer.MIN_VALUE wraps)."""
    code, a = java_value(a)
    if code == I32:
        return Int32(wrap_int(-a))
    if code == I64:
        return wrap_long(-int(a))
    if code == F32:
        return Float32(-a)
    if code == F64:
        return -float(a)
    return None


def pos(a: Any) -> Any:
    """Unary plus: only numbers have one."""
    return a if _is_num(jclass(a)) else None


ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": add,
    "-": sub,
    "*": mul,
    "/": div,
    "%": mod,
}
