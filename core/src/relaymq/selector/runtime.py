"""Value semantics used by compiled selectors: comparisons, arithmetic, NULL.

Compiled selector code inlines the common cases (a property compared with a
literal of the same kind) and calls these helpers for everything else. The
helpers therefore define the semantics for *all* inputs, and must never raise:
a selector runs inside the dispatch loop on values chosen by producers.

Conventions: SQL NULL / UNKNOWN is ``None``; booleans are ``True``/``False``;
exact numerics are ``int`` (Java long), approximate numerics ``float``
(Java double). Values of any other Python type are "unsupported": they compare
as non-like to everything and are unknown to every other operator.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

_NUM = 1
_STR = 2
_BOOL = 3
_KIND: dict[type, int] = {int: _NUM, float: _NUM, str: _STR, bool: _BOOL}

_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1
_LONG_SPAN = 2**64

_INT_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?", re.ASCII)
# Converted strings are STOMP header values; anything this long is not a number
# a producer meant, and int() of a huge digit string is slow.
_MAX_NUMERIC_TEXT = 400

Tri = bool | None
Comparator = Callable[[Any, Any], Tri]


def wrap_long(value: int) -> int:
    """Java long arithmetic wraps around on overflow; so does RelayMQ's."""
    if _LONG_MIN <= value <= _LONG_MAX:
        return value
    return (value - _LONG_MIN) % _LONG_SPAN + _LONG_MIN


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
# STOMP string conversion.


def parse_number(text: str) -> int | float | None:
    """The numeric value of a string header value, or None if it is not a number."""
    if len(text) > _MAX_NUMERIC_TEXT:
        return None
    if _INT_TEXT.fullmatch(text):
        return int(text)
    if _FLOAT_TEXT.fullmatch(text):
        if text[-1] in "fFdD":
            text = text[:-1]
        return float(text)
    return None


def parse_boolean(text: str) -> bool | None:
    """'true'/'false' in any letter case, else None."""
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


_NO_VALUE = object()


def _convert(text: str, target_kind: int) -> object:
    """Convert a string towards the other operand's kind, or return _NO_VALUE."""
    if target_kind == _NUM:
        number = parse_number(text)
        return _NO_VALUE if number is None else number
    if target_kind == _BOOL:
        flag = parse_boolean(text)
        return _NO_VALUE if flag is None else flag
    return _NO_VALUE


# --------------------------------------------------------------------------
# Comparisons.


class Comparisons:
    """The comparison operators for one string-conversion mode.

    Strict JMS (``string_conversion=False``): comparing values of different
    kinds (string vs number, boolean vs string, ...) is FALSE, any NULL operand
    gives UNKNOWN, and ordering (<, >, <=, >=) strings or booleans gives UNKNOWN
    because JMS only defines = and <> for them.

    With ``string_conversion=True`` a string compared with a number or boolean
    is first converted when it parses as one (STOMP headers are all strings).
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
            ka = _KIND.get(type(a))
            kb = _KIND.get(type(b))
            if ka is None or kb is None:
                return False
            if ka != kb:
                if not convert:
                    return False
                if ka == _STR:
                    a = _convert(a, kb)
                    if a is _NO_VALUE:
                        return False
                elif kb == _STR:
                    b = _convert(b, ka)
                    if b is _NO_VALUE:
                        return False
                else:
                    return False
            return (a != b) if negate else (a == b)

        return equality

    def _make_ordering(self, op: Callable[[Any, Any], bool]) -> Comparator:
        convert = self.string_conversion

        def ordering(a: Any, b: Any) -> Tri:
            if a is None or b is None:
                return None
            ka = _KIND.get(type(a))
            kb = _KIND.get(type(b))
            if ka == _NUM and kb == _NUM:
                return op(a, b)
            if ka is None or kb is None:
                return False
            if ka == kb:
                return None  # strings and booleans have no order in JMS
            if convert and (ka == _STR or kb == _STR):
                if ka == _STR:
                    a = _convert(a, kb)
                    if a is _NO_VALUE:
                        return False
                else:
                    b = _convert(b, ka)
                    if b is _NO_VALUE:
                        return False
                if type(a) is bool:
                    return None  # converted to boolean: still unordered
                return op(a, b)
            return False

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
# Arithmetic: Java numeric promotion; anything else is unknown.


def _is_num(t: type) -> bool:
    return t is int or t is float


def add(a: Any, b: Any) -> Any:
    """Numeric addition, or string concatenation when both are strings (ActiveMQ)."""
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        return wrap_long(a + b)
    if _is_num(ta) and _is_num(tb):
        try:
            return a + b
        except OverflowError:
            return None
    if ta is str and tb is str:
        return a + b
    return None


def sub(a: Any, b: Any) -> Any:
    """Numeric subtraction."""
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        return wrap_long(a - b)
    if _is_num(ta) and _is_num(tb):
        try:
            return a - b
        except OverflowError:
            return None
    return None


def mul(a: Any, b: Any) -> Any:
    """Numeric multiplication."""
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        return wrap_long(a * b)
    if _is_num(ta) and _is_num(tb):
        try:
            return a * b
        except OverflowError:
            return None
    return None


def div(a: Any, b: Any) -> Any:
    """Division: exact operands truncate toward zero; division by zero is unknown."""
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        if b == 0:
            return None
        q = abs(a) // abs(b)
        return wrap_long(q if (a < 0) == (b < 0) else -q)
    if _is_num(ta) and _is_num(tb):
        if b == 0:
            return None
        try:
            return a / b
        except (OverflowError, ZeroDivisionError):
            return None
    return None


def mod(a: Any, b: Any) -> Any:
    """Remainder with the sign of the dividend (Java ``%``, an ActiveMQ extension)."""
    ta = type(a)
    tb = type(b)
    if ta is int and tb is int:
        if b == 0:
            return None
        r = abs(a) % abs(b)
        return wrap_long(r if a >= 0 else -r)
    if _is_num(ta) and _is_num(tb):
        if b == 0:
            return None
        try:
            return math.fmod(a, b)
        except ValueError:
            return math.nan  # infinite dividend: Java yields NaN
        except OverflowError:
            return None
    return None


def neg(a: Any) -> Any:
    """Unary minus."""
    t = type(a)
    if t is int:
        return wrap_long(-a)
    if t is float:
        return -a
    return None


def pos(a: Any) -> Any:
    """Unary plus: only numbers have one."""
    t = type(a)
    return a if t is int or t is float else None


ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": add,
    "-": sub,
    "*": mul,
    "/": div,
    "%": mod,
}
