"""Java typing in selectors: int vs long vs float vs double, as ActiveMQ evaluates them."""

from __future__ import annotations

import struct

import pytest
from relaymq.model.jtypes import Float32, Int32, to_float32
from relaymq.model.message import Message, SelectorView
from relaymq.selector import Selector

INT_MAX = 2**31 - 1


def f32(x: float) -> Float32:
    return Float32(struct.unpack("<f", struct.pack("<f", x))[0])


def ev(text: str, convert: bool = False, **fields: object) -> bool | None:
    return Selector.compile(text, string_conversion=convert).evaluate(fields)


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        # literals in the int range are Java ints: int + int wraps at 32 bits
        ("2147483647 + 1 < 0", {}, True),
        ("2147483647L + 1 < 0", {}, False),  # an L literal is a long
        ("2147483648 + 1 > 0", {}, True),  # beyond the int range: a long literal
        ("-2147483647 - 2 > 0", {}, True),
        ("i + 1 < 0", {"i": Int32(INT_MAX)}, True),
        ("i + 1 < 0", {"i": INT_MAX}, False),  # a plain int is a Java long
        ("i + j = -2", {"i": Int32(INT_MAX), "j": Int32(INT_MAX)}, True),
        ("i + j > 0", {"i": Int32(INT_MAX), "j": INT_MAX}, True),  # long involved
        ("i * 65536 * 65536 = 0", {"i": Int32(1)}, True),
        ("i * 65536 * 65536 = 4294967296", {"i": 1}, True),
        ("i / -1 = i", {"i": Int32(-(2**31))}, True),  # Integer.MIN_VALUE / -1 wraps
        ("-i = i", {"i": Int32(-(2**31))}, True),
        ("i / 2 = 3", {"i": Int32(7)}, True),
        ("i / 2.0 = 3.5", {"i": Int32(7)}, True),
        ("i % 4 = -3", {"i": Int32(-7)}, True),
        # comparisons: an int or long meeting a float is rounded to a float first
        ("f = 16777217", {"f": f32(16777216.0)}, True),
        ("f = 16777217", {"f": 16777216.0}, False),  # a double holds 16777217 exactly
        ("f = i", {"f": f32(16777216.0), "i": Int32(16777217)}, True),
        ("f = l", {"f": f32(16777216.0), "l": 16777217}, True),
        ("f > 16777216", {"f": f32(16777216.0)}, False),
        ("f BETWEEN 16777217 AND 16777217", {"f": f32(16777216.0)}, True),
        # a long meeting a double is rounded to a double
        ("l = 9007199254740992.0", {"l": 2**53 + 1}, True),
        ("l = 9007199254740993", {"l": 2**53 + 1}, True),
        ("l > 9007199254740992.0", {"l": 2**53 + 1}, False),
        # float vs double: the float widens exactly
        ("f = 1.1", {"f": f32(1.1)}, False),
        ("f = 1.1F", {"f": f32(1.1)}, True),
        ("f * 1 = 1.1", {"f": f32(1.1)}, False),
        ("d = 1.1F", {"d": 1.1}, False),
        # mixed widths compare by value
        ("i = l", {"i": Int32(123), "l": 123}, True),
        ("i < l", {"i": Int32(-1), "l": 2**40}, True),
        # text forms follow Java's toString
        ("REGEX('^1\\.1$', f)", {"f": f32(1.1)}, True),
        ("REGEX('^123$', i)", {"i": Int32(123)}, True),
    ],
)
def test_java_promotion(text: str, fields: dict[str, object], expected: bool) -> None:
    assert ev(text, **fields) is expected
    assert ev(text, True, **fields) is expected  # STOMP conversion changes nothing here


def test_int_arithmetic_result_is_an_int() -> None:
    sel = Selector.compile("(i + 1) * 2 < 0")
    assert sel.evaluate({"i": Int32(2**30 - 2)}) is False
    assert sel.evaluate({"i": Int32(2**30 - 1)}) is True  # 2^30 * 2 overflows an int


def test_header_identifiers_have_their_jms_types() -> None:
    """JMSPriority, JMSXDeliveryCount and JMSXGroupSeq are Java ints; JMSTimestamp a long."""
    m = Message(b"", priority=7, timestamp=2**31, group_seq=INT_MAX)
    view = SelectorView(m, delivery_count=INT_MAX - 1)
    assert Selector.compile("JMSPriority + 2147483647 < 0").matches(view)
    assert Selector.compile("JMSXGroupSeq + 1 < 0").matches(view)
    assert Selector.compile("JMSXDeliveryCount + 1 < 0").matches(view)
    assert Selector.compile("JMSTimestamp + 2147483647 > 0").matches(view)


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        # STOMP headers are strings, parsed with the other operand's Java parser
        ("h = 123", "123", True),
        ("h = 123", "123.0", False),  # Integer.valueOf("123.0") fails: FALSE
        ("h = 123", "+123", True),
        ("h = 123", " 123", False),
        ("h = 123.0", "123", True),  # Double.valueOf
        ("h = 123.0", " 123.0 ", True),  # Double.valueOf trims
        ("h = 123.0", "123.0d", True),
        ("h = 123.0", "0x1.ecp6", True),  # hexadecimal floating point
        ("h > 2147483647", "2147483648", False),  # Integer.valueOf overflows
        ("h > 2147483647L", "2147483648", True),
        ("h > 2147483648", "2147483649", True),  # a long literal: Long.valueOf
        ("h = 1.1F", "1.1", True),  # Float.valueOf
        ("h <> 123", "abc", False),  # does not parse: FALSE for <> too
        ("h = TRUE", "TRUE", True),
        ("h = FALSE", "no", True),  # Boolean.valueOf: anything but "true" is false
        ("h", "true", False),  # not a boolean: FALSE as a condition
        ("NOT h", "true", True),
        ("NOT h", "false", True),
        ("h + 1 = 124", "123", None),  # arithmetic does not convert
        ("h = '123'", "123", True),
    ],
)
def test_stomp_string_typing(text: str, value: str, expected: bool | None) -> None:
    assert ev(text, True, h=value) is expected


def test_strict_mode_does_not_convert_strings() -> None:
    assert ev("h = 123", h="123") is False
    assert ev("NOT h", h="true") is None  # JMS: a non-boolean condition is UNKNOWN


def test_to_float32_rounds_integers_once() -> None:
    # 2^60 + 2^36 + 1 rounds up to 2^60 + 2^37 directly; via a double it would tie down
    n = 2**60 + 2**36 + 1
    assert to_float32(n) == float(2**60 + 2**37)
    assert to_float32(16777217) == 16777216.0
    assert to_float32(1.1) == struct.unpack("<f", struct.pack("<f", 1.1))[0]
