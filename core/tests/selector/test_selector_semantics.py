"""Evaluation semantics: three-valued logic, numeric promotion, NULL, typing."""

from __future__ import annotations

import itertools
import math

import pytest
from relaymq.selector import Selector

T, F, U = True, False, None

# A property holding each truth value: UNKNOWN is a missing boolean property.
TRUTH_FIELDS = {"t": True, "f": False}
NAME = {True: "t", False: "f", None: "u"}


def ev(text: str, **fields: object) -> bool | None:
    return Selector.compile(text).evaluate(fields)


# ----------------------------------------------------------------- truth tables

NOT_TABLE = {T: F, F: T, U: U}
AND_TABLE = {
    (T, T): T, (T, F): F, (T, U): U,
    (F, T): F, (F, F): F, (F, U): F,
    (U, T): U, (U, F): F, (U, U): U,
}  # fmt: skip
OR_TABLE = {
    (T, T): T, (T, F): T, (T, U): T,
    (F, T): T, (F, F): F, (F, U): U,
    (U, T): T, (U, F): U, (U, U): U,
}  # fmt: skip


@pytest.mark.parametrize("a", [T, F, U])
def test_not_truth_table(a: bool | None) -> None:
    assert Selector.compile(f"NOT {NAME[a]}").evaluate(TRUTH_FIELDS) is NOT_TABLE[a]


@pytest.mark.parametrize(("a", "b"), list(itertools.product([T, F, U], repeat=2)))
def test_and_truth_table(a: bool | None, b: bool | None) -> None:
    sel = Selector.compile(f"{NAME[a]} AND {NAME[b]}")
    assert sel.evaluate(TRUTH_FIELDS) is AND_TABLE[(a, b)]
    assert sel.matches(TRUTH_FIELDS) is (AND_TABLE[(a, b)] is True)


@pytest.mark.parametrize(("a", "b"), list(itertools.product([T, F, U], repeat=2)))
def test_or_truth_table(a: bool | None, b: bool | None) -> None:
    sel = Selector.compile(f"{NAME[a]} OR {NAME[b]}")
    assert sel.evaluate(TRUTH_FIELDS) is OR_TABLE[(a, b)]


def _fold(table: dict[tuple[bool | None, bool | None], bool | None], values: tuple) -> object:
    acc = values[0]
    for v in values[1:]:
        acc = table[(acc, v)]
    return acc


@pytest.mark.parametrize("values", list(itertools.product([T, F, U], repeat=3)))
def test_three_operand_chains(values: tuple[bool | None, ...]) -> None:
    names = [NAME[v] for v in values]
    assert ev(" AND ".join(names), **TRUTH_FIELDS) is _fold(AND_TABLE, values)
    assert ev(" OR ".join(names), **TRUTH_FIELDS) is _fold(OR_TABLE, values)
    mixed = f"{names[0]} AND {names[1]} OR {names[2]}"
    assert ev(mixed, **TRUTH_FIELDS) is OR_TABLE[(AND_TABLE[(values[0], values[1])], values[2])]
    mixed = f"NOT ({names[0]} OR {names[1]}) AND {names[2]}"
    expected = AND_TABLE[(NOT_TABLE[OR_TABLE[(values[0], values[1])]], values[2])]
    assert ev(mixed, **TRUTH_FIELDS) is expected


def test_unknown_operands_are_still_short_circuit_safe() -> None:
    # FALSE AND <anything> is FALSE even when <anything> cannot be evaluated.
    assert ev("f AND x / 0 = 1", f=False, x=1) is False
    assert ev("t OR x / 0 = 1", t=True, x=1) is True


# ----------------------------------------------------------------- NULL


@pytest.mark.parametrize(
    "text",
    [
        "x = 1", "x <> 1", "x < 1", "x > 1", "x <= 1", "x >= 1", "1 = x", "x = y",
        "x + 1 = 2", "x - 1 = 2", "x * 2 = 2", "x / 2 = 2", "x % 2 = 1", "-x = 1",
        "x BETWEEN 1 AND 2", "x NOT BETWEEN 1 AND 2", "1 BETWEEN x AND 2",
        "x LIKE 'a%'", "x NOT LIKE 'a%'", "x IN ('a')", "x NOT IN ('a')",
        "x = 'a'", "x <> 'a'", "x = TRUE", "x <> FALSE", "NOT x", "x",
    ],
)  # fmt: skip
def test_null_operands_give_unknown(text: str) -> None:
    assert ev(text, y=1) is None
    assert ev(text, x=None, y=1) is None  # explicit None is the same as missing


def test_between_with_one_null_bound_follows_the_and_or_expansion() -> None:
    # x BETWEEN lo AND hi == x >= lo AND x <= hi
    assert ev("x BETWEEN lo AND hi", x=5, hi=1) is False  # x <= hi is FALSE
    assert ev("x BETWEEN lo AND hi", x=5, hi=9) is None
    # x NOT BETWEEN lo AND hi == x < lo OR x > hi
    assert ev("x NOT BETWEEN lo AND hi", x=5, hi=1) is True
    assert ev("x NOT BETWEEN lo AND hi", x=5, hi=9) is None


# ----------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        ("i = 123.0", {"i": 123}, True),  # int vs float: promotion
        ("f = 123", {"f": 123.0}, True),
        ("i < 123.5", {"i": 123}, True),
        ("i = f", {"i": 2, "f": 2.0}, True),
        ("i > f", {"i": 3, "f": 2.5}, True),
        ("i * 1.5 = 184.5", {"i": 123}, True),
        ("i / 2 = 1", {"i": 3}, True),  # exact division truncates
        ("i / 2.0 = 1.5", {"i": 3}, True),  # approximate division does not
        ("-7 / 2 = -3", {}, True),  # truncation toward zero, not floor
        ("7 / -2 = -3", {}, True),
        ("-7 % 3 = -1", {}, True),  # remainder has the dividend's sign (Java)
        ("7 % -3 = 1", {}, True),
        ("-7.5 % 2 = -1.5", {}, True),
        ("i / 0 = 0", {"i": 1}, None),  # division by zero: unknown
        ("i / 0.0 = 0", {"i": 1}, None),
        ("f / 0 = 0", {"f": 1.5}, None),
        ("i % 0 = 0", {"i": 1}, None),
        ("(i / 0 = 0) IS NULL", {"i": 1}, True),
        ("9223372036854775807 + 1 = -9223372036854775808", {}, True),  # long wraps
        ("big * 2 = -2", {"big": 2**63 - 1}, True),
        ("-9223372036854775808 / -1 = -9223372036854775808", {}, True),
        ("1E308 * 10 > 1E308", {}, True),  # double overflow is +Infinity
        ("nan = nan", {"nan": math.nan}, False),  # IEEE: NaN equals nothing
        ("nan <> nan", {"nan": math.nan}, True),
        ("nan < 1 OR nan >= 1", {"nan": math.nan}, False),
        ("inf > 1E308", {"inf": math.inf}, True),
        ("inf % 2 = 0", {"inf": math.inf}, False),  # NaN
        ("z = 0", {"z": -0.0}, True),
        ("x BETWEEN 1.5 AND 2", {"x": 2}, True),
        ("x BETWEEN 2 AND 1", {"x": 1}, False),
        ("x NOT BETWEEN 2 AND 1", {"x": 1}, True),
    ],
)
def test_numeric_semantics(text: str, fields: dict[str, object], expected: bool | None) -> None:
    assert ev(text, **fields) is expected


def test_byte_short_int_long_are_all_exact() -> None:
    for value in (123, 123, 123, 123):  # the kernel maps every Java integral type to int
        assert ev("p = 123 AND p + 1 = 124 AND p / 2 = 61", p=value) is True


# ----------------------------------------------------------------- typing


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    [
        # Comparing non-like types is FALSE (JMS 1.1 3.8.1.2), in both directions.
        ("s = 1", {"s": "1"}, False),
        ("s <> 1", {"s": "1"}, False),  # <> is also a comparison of non-like types
        ("s > 1", {"s": "5"}, False),
        ("n = 'a'", {"n": 1}, False),
        ("b = 1", {"b": True}, False),
        ("b = 'true'", {"b": True}, False),
        ("n = TRUE", {"n": 1}, False),
        ("s = TRUE", {"s": "true"}, False),
        ("x = y", {"x": 1, "y": "1"}, False),
        ("x BETWEEN 1 AND 3", {"x": "2"}, False),
        ("x NOT BETWEEN 1 AND 3", {"x": "2"}, False),  # x < 1 OR x > 3: both FALSE
        # Ordering strings or booleans is not defined by JMS: unknown.
        ("a < b", {"a": "x", "b": "y"}, None),
        ("a >= b", {"a": True, "b": False}, None),
        # Equality of strings and booleans is defined.
        ("a = b", {"a": "x", "b": "x"}, True),
        ("a <> b", {"a": True, "b": False}, True),
        ("a = 'James'", {"a": "james"}, False),  # case-sensitive
        # Operators that need a particular type give unknown for others.
        ("n LIKE '1%'", {"n": 12}, None),
        ("n NOT LIKE '1%'", {"n": 12}, None),
        ("n IN ('12')", {"n": 12}, None),
        ("n NOT IN ('12')", {"n": 12}, None),
        ("s + 1 = 2", {"s": "1"}, None),
        ("-s = 1", {"s": "1"}, None),
        ("b * 1 = 1", {"b": True}, None),
        ("NOT s", {"s": "x"}, None),
        # String concatenation with + (ActiveMQ extension).
        ("s + '!' = 'hi!'", {"s": "hi"}, True),
        ("s + t = 'ab'", {"s": "a", "t": "b"}, True),
        ("s + 1 IS NULL", {"s": "a"}, True),
    ],
)
def test_type_rules(text: str, fields: dict[str, object], expected: bool | None) -> None:
    assert ev(text, **fields) is expected


@pytest.mark.parametrize("value", [b"bytes", [1], {"a": 1}, object(), (1,), 1 + 2j])
def test_unsupported_value_types_never_raise(value: object) -> None:
    texts = [
        "x = 1", "x = 'a'", "x = TRUE", "x < 1", "x <> y", "x + 1 = 2", "-x = 1",
        "x BETWEEN 1 AND 2", "x LIKE 'a%'", "x LIKE 'a_b%c'", "x IN ('a')", "x IS NULL",
        "x", "NOT x", "REGEX('a', x)", "INLIST(MAKELIST('a'), x)", "INLIST(SPLIT(x, ','), 'a')",
    ]  # fmt: skip
    for text in texts:
        result = Selector.compile(text).evaluate({"x": value, "y": value})
        assert result in (True, False, None)
    assert ev("x = 1", x=value) is False  # non-like
    assert ev("x IS NOT NULL", x=value) is True
    assert ev("x LIKE 'a%'", x=value) is None


def test_header_identifiers_are_plain_lookups() -> None:
    fields = {
        "JMSDeliveryMode": "PERSISTENT",
        "JMSPriority": 7,
        "JMSMessageID": "ID:1",
        "JMSTimestamp": 1700000000000,
        "JMSCorrelationID": "c1",
        "JMSType": "car",
        "JMSRedelivered": False,
        "JMSXDeliveryCount": 1,
        "JMSXGroupID": "g",
        "JMSXGroupSeq": 2,
        "JMSXUserID": "alice",
    }
    text = (
        "JMSDeliveryMode = 'PERSISTENT' AND JMSPriority > 4 AND JMSMessageID LIKE 'ID:%'"
        " AND JMSTimestamp > 0 AND JMSCorrelationID = 'c1' AND JMSType = 'car'"
        " AND NOT JMSRedelivered AND JMSXDeliveryCount = 1 AND JMSXGroupID = 'g'"
        " AND JMSXGroupSeq = 2 AND JMSXUserID IN ('alice', 'bob')"
    )
    assert Selector.compile(text).evaluate(fields) is True
    assert ev("JMSCorrelationID IS NULL") is True
