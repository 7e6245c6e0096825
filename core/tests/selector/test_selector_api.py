"""The Selector interface: caching, field access, STOMP string conversion, code safety."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from relaymq.selector import CACHE_SIZE, InvalidSelector, Selector


class GetOnly:
    """A mapping stand-in that only supports ``get``, like the kernel's lazy message view."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values
        self.calls: list[str] = []

    def get(self, name: str, default: Any = None) -> Any:
        self.calls.append(name)
        return self._values.get(name, default)

    def __getitem__(self, name: str) -> Any:
        raise AssertionError("selector used []")

    def __contains__(self, name: object) -> bool:
        raise AssertionError("selector used 'in'")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("selector iterated the fields")

    def keys(self) -> Any:
        raise AssertionError("selector called keys()")

    def __len__(self) -> int:
        raise AssertionError("selector called len()")


ALL_SHAPES = [
    "a = 1", "a <> 'x'", "a > b", "a + 1 = 2", "-a = 1", "a BETWEEN 1 AND b",
    "a NOT BETWEEN 1 AND 2", "a LIKE 'x%'", "a LIKE 'x_y%z'", "a IN ('x')", "a IS NULL",
    "a IS NOT NULL", "a", "NOT a", "a AND b OR c", "REGEX('x', a)", "REGEX(b, a)",
    "INLIST(MAKELIST(b, 'x'), a)", "INLIST(SPLIT(b, ','), a)", "a + b = 'xy'", "a % 2 = 1",
]  # fmt: skip


@pytest.mark.parametrize("text", ALL_SHAPES)
def test_fields_are_read_only_through_get(text: str) -> None:
    for values in ({}, {"a": 1, "b": 2, "c": True}, {"a": "x", "b": "x,y", "c": None}):
        view = GetOnly(values)
        sel = Selector.compile(text)
        assert sel.evaluate(view) in (True, False, None)
        sel.matches(view)
        assert set(view.calls) <= {"a", "b", "c"}
        assert view.calls  # something was looked up


def test_constant_selectors_do_not_touch_fields() -> None:
    view = GetOnly({})
    assert Selector.compile("1 < 2").evaluate(view) is True
    assert Selector.compile("").matches(view) is True
    assert view.calls == []


def test_short_circuit_skips_unneeded_lookups() -> None:
    view = GetOnly({"a": 2})
    assert Selector.compile("a = 1 AND b = 2 AND c = 3").evaluate(view) is False
    assert view.calls == ["a"]


def test_evaluate_and_matches() -> None:
    sel = Selector.compile("color = 'red' AND weight > 2.5")
    assert sel.text == "color = 'red' AND weight > 2.5"
    assert sel.evaluate({"color": "red", "weight": 3}) is True
    assert sel.evaluate({"color": "red", "weight": 2}) is False
    assert sel.evaluate({"color": "red"}) is None
    assert sel.matches({"color": "red", "weight": 3}) is True
    assert sel.matches({"color": "red"}) is False
    assert sel.identifiers == frozenset({"color", "weight"})
    assert repr(sel) == "Selector(\"color = 'red' AND weight > 2.5\")"


def test_cache_returns_the_same_compiled_selector() -> None:
    Selector.cache_clear()
    first = Selector.compile("x = 1")
    assert Selector.compile("x = 1") is first
    assert Selector.compile("x = 1", string_conversion=True) is not first
    assert Selector.compile("x = 1", string_conversion=True).string_conversion is True
    assert Selector.compile("x =  1") is not first  # keyed by exact text
    info = Selector.cache_info()
    assert info.hits >= 1
    assert info.maxsize == CACHE_SIZE == 4096


def test_cache_is_bounded() -> None:
    Selector.cache_clear()
    for i in range(CACHE_SIZE + 50):
        Selector.compile(f"x = {i}")
    assert Selector.cache_info().currsize == CACHE_SIZE


def test_invalid_selector_is_a_value_error() -> None:
    with pytest.raises(ValueError) as info:
        Selector.compile("x = ")
    assert isinstance(info.value, InvalidSelector)
    assert info.value.offset == 4


def test_equality_and_hash() -> None:
    a = Selector("x = 1")
    b = Selector("x = 1")
    assert a == b and hash(a) == hash(b)
    assert a != Selector("x = 1", string_conversion=True)


# ----------------------------------------------------------------- code safety


@pytest.mark.parametrize(
    "payload",
    [
        "__import__('os').system('echo pwned')",
        "') or __import__('os') or ('",
        "\\'; import os; '",
        '"""',
        "\n    return True\n",
        "{0}{1}",
        "%s%d",
    ],
)
def test_literals_are_never_spliced_into_generated_code(payload: str) -> None:
    quoted = payload.replace("'", "''")
    for text in (
        f"s = '{quoted}'",
        f"s LIKE '%{quoted}%'",
        f"s IN ('{quoted}')",
        "REGEX('" + re.escape(payload).replace("'", "''") + "', s)",
    ):
        sel = Selector.compile(text)
        assert payload not in sel.source
        assert sel.evaluate({"s": payload}) in (True, False, None)
    assert Selector.compile(f"s = '{quoted}'").evaluate({"s": payload}) is True


def test_identifiers_are_bound_not_spliced() -> None:
    sel = Selector.compile("évènement_$x = 1 AND JMSType = 'a'")
    assert "évènement_$x" not in sel.source
    assert "JMSType" not in sel.source
    assert sel.evaluate({"évènement_$x": 1, "JMSType": "a"}) is True


def test_generated_code_has_no_builtins_beyond_the_few_it_needs() -> None:
    sel = Selector.compile("x = 1")
    globals_ = sel.evaluate.__globals__  # type: ignore[attr-defined]
    assert set(globals_["__builtins__"]) == {"type", "len", "str", "bool"}


# ----------------------------------------------------------------- STOMP


def conv(text: str, **fields: object) -> bool | None:
    return Selector.compile(text, string_conversion=True).evaluate(fields)


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        ("count > 5", {"count": "7"}, True),
        ("count > 5", {"count": "3"}, False),
        ("count = 7", {"count": "7"}, True),
        ("count = 7", {"count": "7.0"}, False),  # int literal: Integer.valueOf rejects "7.0"
        ("count = 7.0", {"count": "7"}, True),  # decimal literal: Double.valueOf
        ("count = 7.5", {"count": "7.5"}, True),
        ("count > 5", {"count": "7.5"}, False),
        ("count > 5.0", {"count": "7.5"}, True),
        ("count > 5.0", {"count": " 7.5 "}, True),  # Double.valueOf trims
        ("count > 5", {"count": "1e3"}, False),
        ("count > 5.0", {"count": "1e3"}, True),
        ("count > 2147483647", {"count": "2147483648"}, False),  # Integer.valueOf overflows
        ("count > 2147483647L", {"count": "2147483648"}, True),  # Long.valueOf
        ("flag = FALSE", {"flag": "yes"}, True),  # Boolean.valueOf: anything but "true" is false
        ("count <> 7", {"count": "8"}, True),
        ("count <= 7", {"count": "-7"}, True),
        ("count >= 7", {"count": "+7"}, True),
        ("5 < count", {"count": "7"}, True),
        ("count > 5", {"count": "seven"}, False),  # does not parse: non-like, FALSE
        ("count > 5", {"count": " 7"}, False),
        ("count > 5", {"count": ""}, False),
        ("count = limit", {"count": "7", "limit": 7}, True),
        ("count > limit", {"count": 9, "limit": "7"}, True),
        ("count BETWEEN 1 AND 10", {"count": "7"}, True),
        ("count NOT BETWEEN 1 AND 10", {"count": "70"}, True),
        ("flag = TRUE", {"flag": "true"}, True),
        ("flag = TRUE", {"flag": "TRUE"}, True),
        ("flag = FALSE", {"flag": "false"}, True),
        ("flag = TRUE", {"flag": "yes"}, False),
        ("flag <> TRUE", {"flag": "false"}, True),
        ("flag = other", {"flag": "true", "other": True}, True),
        ("flag > other", {"flag": "true", "other": True}, None),  # booleans have no order
        ("count + 1 > 5", {"count": "7"}, None),  # arithmetic on strings: unknown
        ("count * 2 = 14", {"count": "7"}, None),
        ("count IN ('7')", {"count": 7}, None),  # IN is not converted
        ("count IN ('7')", {"count": "7"}, True),
        ("a = b", {"a": "7", "b": "7.0"}, False),  # two strings compare as strings
        ("a < b", {"a": "1", "b": "2"}, None),
        ("count > 5", {}, None),
        ("flag", {"flag": "true"}, False),  # a non-boolean used as a condition is FALSE
        ("NOT flag", {"flag": "true"}, True),
        ("NOT flag", {"flag": "false"}, True),
        ("NOT flag", {}, None),
    ],
)
def test_string_conversion(text: str, fields: dict[str, object], expected: bool | None) -> None:
    assert conv(text, **fields) is expected


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("count > 5", {"count": "7"}),
        ("flag = TRUE", {"flag": "true"}),
        ("count BETWEEN 1 AND 10", {"count": "7"}),
        ("count = 7", {"count": "7"}),
    ],
)
def test_strict_mode_does_not_convert(text: str, fields: dict[str, object]) -> None:
    assert Selector.compile(text).evaluate(fields) is False
