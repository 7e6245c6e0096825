"""ActiveMQ extension functions: REGEX, INLIST, SPLIT, MAKELIST."""

from __future__ import annotations

import math
import re

import pytest
from relaymq.model.java_numbers import java_double_string, java_float_string
from relaymq.model.jtypes import to_float32
from relaymq.selector import Selector
from relaymq.selector.functions import java_split, java_string


def ev(text: str, **fields: object) -> bool | None:
    return Selector.compile(text).evaluate(fields)


def test_regex_uses_find_semantics() -> None:
    assert ev("REGEX('[0-9]+', s)", s="abc123") is True  # unanchored, like Matcher.find
    assert ev("REGEX('^[0-9]+$', s)", s="abc123") is False
    assert ev("REGEX('^a.c$', s)", s="abc") is True
    assert ev("NOT REGEX('x', s)", s="abc") is True


def test_regex_on_numbers_and_booleans_uses_java_text() -> None:
    assert ev("REGEX('^[1-8]*$', n)", n=1870414179) is False
    assert ev("REGEX('^[0-9]+$', n)", n=1870414179) is True
    assert ev("REGEX('^123\\.0$', d)", d=123.0) is True
    assert ev("REGEX('E10$', d)", d=1e10) is True
    assert ev("REGEX('^true$', b)", b=True) is True


def test_regex_null_and_dynamic_patterns() -> None:
    assert ev("REGEX('a', s)") is None
    assert ev("REGEX(p, s)", p="^a", s="abc") is True
    assert ev("REGEX(p, s)", p="^b", s="abc") is False
    assert ev("REGEX(p, s)", p="[", s="abc") is None  # bad pattern from a message
    assert ev("REGEX(p, s)", s="abc") is None
    assert ev("REGEX(p, s)", p=1, s="123") is True


def test_inlist_with_makelist() -> None:
    assert ev("INLIST(MAKELIST('a', 'b'), s)", s="b") is True
    assert ev("INLIST(MAKELIST('a', 'b'), s)", s="c") is False
    assert ev("INLIST(MAKELIST(1, 2.5, 'x'), v)", v=2.5) is True
    assert ev("INLIST(MAKELIST(1, 2), v)", v=1.0) is True  # selector equality promotes
    assert ev("INLIST(MAKELIST(1, 2), v)", v="1") is False
    assert ev("INLIST(MAKELIST(a, b), v)", a="x", b="y", v="y") is True
    assert ev("INLIST(MAKELIST(), v)", v="y") is False
    assert ev("INLIST(MAKELIST('a'), v)") is None
    assert ev("NOT INLIST(MAKELIST('a'), v)", v="b") is True


def test_inlist_with_split() -> None:
    assert ev("INLIST(SPLIT('Tom,James,George', ','), name)", name="James") is True
    assert ev("INLIST(SPLIT('Tom,James,George', ','), name)", name="Jam") is False
    assert ev("INLIST(SPLIT(csv, ','), 'b')", csv="a,b,c") is True
    assert ev("INLIST(SPLIT(csv, ','), 'b')") is None  # SPLIT of NULL is NULL
    assert ev("INLIST(SPLIT(csv, ','), 'b')", csv=5) is None
    assert ev("INLIST(SPLIT(csv, '\\s*;\\s*'), 'b')", csv="a ; b;c") is True  # regex separator
    assert ev("INLIST(SPLIT(csv, ',', 2), 'b,c')", csv="a,b,c") is True  # limit
    assert ev("INLIST(SPLIT(csv, sep), 'b')", csv="a|b", sep="\\|") is True
    assert ev("INLIST(SPLIT(csv, sep), 'b')", csv="a|b", sep="(") is None


@pytest.mark.parametrize(
    ("text", "pattern", "limit", "expected"),
    [
        ("a,b,c", ",", 0, ["a", "b", "c"]),
        ("a,b,,", ",", 0, ["a", "b"]),  # trailing empty strings dropped
        ("a,b,,", ",", -1, ["a", "b", "", ""]),
        (",a", ",", 0, ["", "a"]),
        ("", ",", 0, [""]),
        ("abc", "", 0, ["a", "b", "c"]),  # zero-width: no leading empty string
        ("a,b,c", ",", 2, ["a", "b,c"]),
        ("a,b,c", ",", 1, ["a,b,c"]),
        ("a1b22c", "[0-9]+", 0, ["a", "b", "c"]),
        ("no-sep", ",", 0, ["no-sep"]),
        (",,,", ",", 0, []),
    ],
)
def test_java_split(text: str, pattern: str, limit: int, expected: list[str]) -> None:
    assert java_split(text, re.compile(pattern), limit) == expected


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (123.0, "123.0"),
        (0.001, "0.001"),
        (1e-4, "1.0E-4"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (1.5e10, "1.5E10"),
        (-2.5e-7, "-2.5E-7"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (math.nan, "NaN"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (5e-324, "4.9E-324"),  # one digit would name it: Java takes the nearest two
        (2e23, "2.0E23"),
        (100.0, "100.0"),
    ],
)
def test_java_double_string(value: float, text: str) -> None:
    assert java_double_string(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.1, "1.1"),
        (1.4e-45, "1.4E-45"),
        (3.4028235e38, "3.4028235E38"),
        (1e10, "1.0E10"),
        (0.5, "0.5"),
    ],
)
def test_java_float_string(value: float, text: str) -> None:
    assert java_float_string(to_float32(value)) == text


def test_selectors_show_doubles_as_java() -> None:
    assert java_string(5e-324) == "4.9E-324"


def test_java_string_of_other_values() -> None:
    assert java_string("s") == "s"
    assert java_string(True) == "true"
    assert java_string(-5) == "-5"
    assert java_string(b"x") is None
