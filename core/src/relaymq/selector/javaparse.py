"""Java's string-to-value parsers, as ActiveMQ applies them to STOMP headers.

With string conversion on (STOMP subscriptions), ActiveMQ converts a string
compared with a typed value using the parser of that value's Java class:
``Integer.valueOf``, ``Long.valueOf``, ``Float.valueOf``, ``Double.valueOf`` or
``Boolean.valueOf``. A string the parser rejects (NumberFormatException) makes
the comparison FALSE. These functions reproduce the parsers' grammars.
"""

from __future__ import annotations

import re

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
    to_float32,
)

#: Returned when the text is not a value of the requested class.
NO_VALUE = object()

# Integer.parseInt: an optional sign, then digits (Character.digit accepts any
# Unicode decimal digit, as Python's \d and int() do). No spaces, no '_', no 0x.
_INT_TEXT = re.compile(r"[+-]?\d+")
# Double.valueOf (FloatingDecimal): surrounding whitespace (chars <= ' ') is
# trimmed; NaN, Infinity, decimal with optional exponent and f/F/d/D suffix,
# and hexadecimal floating point (0x1.8p1). ASCII digits only.
_FLOAT_TEXT = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)", re.ASCII
)
_HEX_FLOAT_TEXT = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?", re.ASCII
)
# Longer texts are not numbers a producer meant, and int() of huge digit strings is slow.
_MAX_TEXT = 400


def _java_trim(text: str) -> str:
    """String.trim(): strips every char <= U+0020 at both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_integer(text: str, low: int, high: int) -> object:
    """Integer.valueOf / Long.valueOf: the value, or NO_VALUE."""
    if len(text) > _MAX_TEXT or _INT_TEXT.fullmatch(text) is None:
        return NO_VALUE
    value = int(text)
    return value if low <= value <= high else NO_VALUE


def parse_double(text: str) -> object:
    """Double.valueOf: the value, or NO_VALUE."""
    if len(text) > _MAX_TEXT:
        return NO_VALUE
    text = _java_trim(text)
    if _FLOAT_TEXT.fullmatch(text):
        if text[-1] in "fFdD":
            text = text[:-1]
        return float(text.replace("Infinity", "inf"))
    hex_match = _HEX_FLOAT_TEXT.fullmatch(text)
    if hex_match:
        try:
            return float.fromhex(hex_match.group(1) + "0x" + hex_match.group(2))
        except (OverflowError, ValueError):
            return NO_VALUE
    return NO_VALUE


def parse_as(text: str, jclass: int) -> object:
    """Convert a string to the Java class ``jclass`` as ActiveMQ does, or NO_VALUE."""
    if jclass == I32:
        return parse_integer(text, INT_MIN, INT_MAX)
    if jclass == I64:
        return parse_integer(text, LONG_MIN, LONG_MAX)
    if jclass == F64:
        return parse_double(text)
    if jclass == F32:
        value = parse_double(text)
        return value if value is NO_VALUE else to_float32(value)  # type: ignore[arg-type]
    if jclass == BOOL:
        return text.lower() == "true"  # Boolean.valueOf: anything else is false, never fails
    return NO_VALUE
