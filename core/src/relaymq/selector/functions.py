"""ActiveMQ selector extension functions: REGEX, INLIST, SPLIT, MAKELIST.

ActiveMQ clients (and virtual-topic selector caches migrated from ActiveMQ)
use these; RelayMQ accepts them so such selectors keep working. Each function
declares its arity and argument kinds so misuse is an InvalidSelector at
subscribe time; at run time, arguments of the wrong type or NULL give UNKNOWN.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from relaymq.model.java_numbers import java_double_string, java_float_string
from relaymq.model.jtypes import BOOL, F32, F64, I32, I64, STR, jclass
from relaymq.selector.nodes import VKind
from relaymq.selector.runtime import Comparisons, Tri

_SCALAR = VKind.BOOL | VKind.NUM | VKind.STR


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """Static signature of an extension function.

    ``arg_kinds[i]`` lists the kinds argument *i* may have; the last entry
    applies to any further arguments (for variadic MAKELIST).
    """

    name: str
    min_args: int
    max_args: int | None
    arg_kinds: tuple[VKind, ...]
    result: VKind

    def allowed(self, index: int) -> VKind:
        """Kinds accepted for the argument at ``index``."""
        return self.arg_kinds[min(index, len(self.arg_kinds) - 1)]


FUNCTIONS: dict[str, FunctionSpec] = {
    "REGEX": FunctionSpec("REGEX", 2, 2, (VKind.STR, _SCALAR), VKind.BOOL),
    "INLIST": FunctionSpec("INLIST", 2, 2, (VKind.LIST, _SCALAR), VKind.BOOL),
    "SPLIT": FunctionSpec("SPLIT", 2, 3, (VKind.STR, VKind.STR, VKind.NUM), VKind.LIST),
    "MAKELIST": FunctionSpec("MAKELIST", 0, None, (_SCALAR,), VKind.LIST),
}


# --------------------------------------------------------------------------
# Regular expressions (Java syntax is close to Python's ``re`` for the common
# subset; patterns are compiled once per distinct text).


class PatternError(ValueError):
    """A literal regular expression that does not compile (reported at compile time)."""


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a literal pattern, raising PatternError with the reason."""
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError) as exc:
        raise PatternError(str(exc)) from None


@functools.lru_cache(maxsize=256)
def _dynamic_pattern(pattern: str) -> re.Pattern[str] | None:
    """Patterns that come from message fields: a bad one just means UNKNOWN."""
    try:
        return re.compile(pattern)
    except Exception:  # noqa: BLE001 - any failure on producer-chosen text is UNKNOWN
        return None


def java_string(value: object) -> str | None:
    """``String.valueOf`` for the JMS value types; None for anything else.

    REGEX matches the textual form of numbers and booleans (ActiveMQ calls
    ``toString()``), so ``REGEX('^[0-9]+$', count)`` works on a long property.
    """
    code = jclass(value)
    if code == STR:
        return str(value)
    if code == BOOL:
        return "true" if value else "false"
    if code == I32 or code == I64:
        try:
            return str(int(cast(int, value)))
        except ValueError:  # beyond Python's int-to-str digit limit; not a Java long
            return None
    if code == F32:
        return java_float_string(float(cast(float, value)))
    if code == F64:
        return java_double_string(float(cast(float, value)))
    return None


def regex_dynamic(pattern: Any, value: Any) -> Tri:
    """``REGEX(pattern, value)`` with a pattern computed per message (Matcher.find)."""
    if pattern is None or value is None:
        return None
    pattern_text = java_string(pattern)
    subject = java_string(value)
    if pattern_text is None or subject is None:
        return None
    compiled = _dynamic_pattern(pattern_text)
    if compiled is None:
        return None
    return compiled.search(subject) is not None


def make_regex_literal(compiled: re.Pattern[str]) -> Callable[[Any], Tri]:
    """``REGEX('literal', value)``: the pattern was validated at compile time."""
    search = compiled.search

    def regex_literal(value: Any) -> Tri:
        if type(value) is str:
            return search(value) is not None
        subject = java_string(value)
        if subject is None:
            return None
        return search(subject) is not None

    return regex_literal


# --------------------------------------------------------------------------
# Lists.


def make_inlist(comparisons: Comparisons) -> Callable[[Any, Any], Tri]:
    """``INLIST(list, value)``: TRUE when some element ``= value`` (selector equality)."""
    eq = comparisons.eq

    def inlist(items: Any, value: Any) -> Tri:
        if value is None or type(items) is not list:
            return None
        for item in items:
            if eq(item, value) is True:
                return True
        return False

    return inlist


def makelist(*items: Any) -> list[Any]:
    """``MAKELIST(a, b, ...)``: a list for INLIST."""
    return list(items)


def split(text: Any, separator: Any, limit: Any = 0) -> list[str] | None:
    """``SPLIT(text, separator[, limit])`` with Java ``String.split`` semantics.

    The separator is a regular expression, and with the default limit of 0
    trailing empty strings are dropped, exactly as in Java (and ActiveMQ).
    """
    if type(text) is not str or type(separator) is not str or jclass(limit) not in (I32, I64):
        return None
    compiled = _dynamic_pattern(separator)
    if compiled is None:
        return None
    return java_split(text, compiled, int(limit))


def java_split(text: str, pattern: re.Pattern[str], limit: int = 0) -> list[str]:
    """Port of ``java.util.regex.Pattern.split(CharSequence, int)``."""
    limited = limit > 0
    parts: list[str] = []
    index = 0
    for match in pattern.finditer(text):
        if not limited or len(parts) < limit - 1:
            if index == 0 and match.start() == 0 and match.end() == 0:
                continue  # no leading empty string for a zero-width match at 0
            parts.append(text[index : match.start()])
            index = match.end()
        elif len(parts) == limit - 1:
            parts.append(text[index:])
            index = match.end()
            break
    if index == 0:
        return [text]
    if not limited or len(parts) < limit:
        parts.append(text[index:])
    if limit == 0:
        while parts and parts[-1] == "":
            parts.pop()
    return parts
