"""Grammar coverage: every literal form, operator and keyword of JMS 1.1 selectors."""

from __future__ import annotations

import pytest
from relaymq.selector import InvalidSelector, Selector
from relaymq.selector.lexer import Kind, tokenize


def ev(text: str, **fields: object) -> bool | None:
    return Selector.compile(text).evaluate(fields)


# ----------------------------------------------------------------- literals


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("'plain'", "plain"),
        ("''", ""),
        ("'it''s'", "it's"),
        ("''''", "'"),
        ("'a''''b'", "a''b"),
        ("'--not a comment'", "--not a comment"),
        ("'/* nor this */'", "/* nor this */"),
        ("'ünïcødé ✓'", "ünïcødé ✓"),
        ("'line\nbreak'", "line\nbreak"),
    ],
)
def test_string_literals(text: str, value: str) -> None:
    assert ev(f"s = {text}", s=value) is True
    assert ev(f"s = {text}", s=value + "x") is False


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("0", 0),
        ("57", 57),
        ("57L", 57),
        ("57l", 57),
        ("0x1F", 31),
        ("0X1f", 31),
        ("0x1FL", 31),
        ("017", 15),
        ("00", 0),
        ("017L", 15),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("0x7FFFFFFFFFFFFFFF", 2**63 - 1),
        ("0xFFFFFFFFFFFFFFFF", -1),  # a 64-bit pattern, as Java long literals
        ("0x8000000000000000", -(2**63)),
        ("01777777777777777777777", -1),
        ("+62", 62),
        ("-957", -957),
    ],
)
def test_exact_literals(literal: str, value: int) -> None:
    sel = Selector.compile(f"x = {literal}")
    assert sel.evaluate({"x": value}) is True
    assert sel.evaluate({"x": value + 1}) is False


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("7E3", 7000.0),
        ("-57.9E2", -5790.0),
        ("7.", 7.0),
        ("-95.7", -95.7),
        ("+6.2", 6.2),
        (".5", 0.5),
        ("5.E10", 5e10),
        (".5E1", 5.0),
        ("1e-3", 0.001),
        ("1E+3", 1000.0),
        ("2.5D", 2.5),
        ("2.5d", 2.5),
        ("3D", 3.0),
        ("1.5F", 1.5),
        ("09.5", 9.5),  # a leading zero does not make a float octal (Java)
        ("1.7976931348623157E308", 1.7976931348623157e308),
        ("4.9E-324", 5e-324),
    ],
)
def test_approximate_literals(literal: str, value: float) -> None:
    assert Selector.compile(f"x = {literal}").evaluate({"x": value}) is True


def test_float_suffix_rounds_to_single_precision() -> None:
    # 1.1F is the float nearest 1.1, exactly what a Java float property holds.
    import struct

    f32 = struct.unpack("<f", struct.pack("<f", 1.1))[0]
    assert ev("x = 1.1F", x=f32) is True
    assert ev("x = 1.1", x=f32) is False
    assert ev("x = 1.1F", x=1.1) is False


def test_boolean_literals_any_case() -> None:
    for t in ("TRUE", "true", "True", "tRuE"):
        assert ev(t) is True
    for f in ("FALSE", "false", "False"):
        assert ev(f) is False
    assert ev("b = TRUE", b=True) is True
    assert ev("b = false", b=False) is True


# ----------------------------------------------------------------- identifiers


@pytest.mark.parametrize(
    "name",
    ["a", "_x", "$dollar", "x9", "JMSType", "JMS_IBM_Format", "café", "名前", "a$b_c", "€uro"],
)
def test_identifiers_follow_java_rules(name: str) -> None:
    assert ev(f"{name} = 1", **{name: 1}) is True


def test_identifiers_are_case_sensitive() -> None:
    assert ev("Color = 'red'", color="red") is None
    assert ev("color = 'red'", color="red") is True


@pytest.mark.parametrize(
    "word", ["NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"]
)
def test_reserved_words_cannot_be_identifiers(word: str) -> None:
    for spelling in (word, word.lower(), word.capitalize()):
        assert tokenize(spelling)[0].kind is Kind.KEYWORD
        if word in ("TRUE", "FALSE"):
            # Always the literal, never a lookup of a property of that name.
            sel = Selector.compile(f"{spelling} IS NULL")
            assert sel.evaluate({spelling: None}) is False
        else:
            with pytest.raises(InvalidSelector):
                Selector.compile(f"{spelling} = 1")


def test_keywords_as_identifier_parts_are_fine() -> None:
    assert ev("ANDroid = 1 AND isNull = 2 AND inx = 3", ANDroid=1, isNull=2, inx=3) is True
    assert ev("notes IS NULL") is True
    assert ev("orders > 1", orders=2) is True


def test_function_names_are_not_reserved() -> None:
    assert ev("regex = 'x' AND split = 1", regex="x", split=1) is True


# ----------------------------------------------------------------- operators


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 5", True),
        ("x <> 5", False),
        ("x < 6", True),
        ("x > 4", True),
        ("x <= 5", True),
        ("x >= 5", True),
        ("x < 5", False),
        ("x > 5", False),
        ("5 = x", True),
        ("6 > x", True),
        ("4 < x", True),
        ("5 >= x", True),
        ("5 <= x", True),
        ("x+1 = 6", True),
        ("x-1 = 4", True),
        ("x*2 = 10", True),
        ("x/2 = 2", True),
        ("x%3 = 2", True),
        ("-x = -5", True),
        ("+x = 5", True),
        ("- -x = 5", True),
        ("-(-x) = 5", True),
    ],
)
def test_comparison_and_arithmetic_operators(text: str, expected: bool) -> None:
    assert ev(text, x=5) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 + 2 * 3 = 7", True),
        ("(1 + 2) * 3 = 9", True),
        ("10 - 2 - 3 = 5", True),  # left associative
        ("100 / 10 / 2 = 5", True),
        ("2 * 3 % 4 = 2", True),
        ("-2 * -3 = 6", True),
        ("- 2 + 3 = 1", True),
        ("7 - -2 = 9", True),
        ("TRUE OR TRUE AND FALSE", True),  # AND binds tighter than OR
        ("(TRUE OR TRUE) AND FALSE", False),
        ("NOT FALSE AND FALSE", False),  # NOT binds tighter than AND
        ("NOT (FALSE AND FALSE)", True),
        ("NOT 1 = 2", True),  # comparison binds tighter than NOT (JMS 1.1 3.8.1.2)
        ("NOT NOT TRUE", True),
        ("1 < 2 AND 2 < 3 OR 1 > 2", True),
    ],
)
def test_precedence(text: str, expected: bool) -> None:
    assert ev(text) is expected


def test_between_forms() -> None:
    assert ev("x BETWEEN 1 AND 10", x=5) is True
    assert ev("x BETWEEN 1 AND 10", x=1) is True
    assert ev("x BETWEEN 1 AND 10", x=10) is True
    assert ev("x BETWEEN 1 AND 10", x=11) is False
    assert ev("x NOT BETWEEN 1 AND 10", x=11) is True
    assert ev("x NOT BETWEEN 1 AND 10", x=5) is False
    assert ev("x BETWEEN lo AND hi", x=5, lo=1, hi=9) is True
    assert ev("x + 1 BETWEEN 2 * 2 AND 3 * 3", x=5) is True
    assert ev("x BETWEEN 1 AND 10 AND y = 1", x=5, y=1) is True
    assert ev("x between 1 and 10", x=5) is True


def test_in_forms() -> None:
    assert ev("c IN ('UK')", c="UK") is True
    assert ev("c IN ('UK', 'US', 'France')", c="US") is True
    assert ev("c IN ('UK', 'US', 'France')", c="Peru") is False
    assert ev("c NOT IN ('UK', 'US', 'France')", c="Peru") is True
    assert ev("c NOT IN ('UK', 'US', 'France')", c="UK") is False
    assert ev("c in ('it''s')", c="it's") is True
    assert ev("c IN ('a','b')", c="A") is False


def test_like_forms() -> None:
    assert ev("w LIKE 'l_se'", w="lose") is True
    assert ev("w LIKE 'l_se'", w="loose") is False
    assert ev("p LIKE '12%3'", p="12993") is True
    assert ev("p LIKE '12%3'", p="1234") is False
    assert ev("w NOT LIKE 'l_se'", w="loose") is True
    assert ev("u LIKE '\\_%' ESCAPE '\\'", u="_foo") is True
    assert ev("u LIKE '\\_%' ESCAPE '\\'", u="bar") is False
    assert ev("w like 'L%'", w="Lima") is True


def test_is_null_forms() -> None:
    assert ev("x IS NULL") is True
    assert ev("x IS NULL", x=1) is False
    assert ev("x IS NOT NULL", x=1) is True
    assert ev("x is not null") is False
    assert ev("x + 1 IS NULL") is True  # arithmetic on NULL is NULL
    assert ev("(x = 1) IS NULL") is True  # the comparison is UNKNOWN
    assert ev("x IS NULL", x=False) is False


def test_parentheses_and_whitespace() -> None:
    assert ev("((((x = 1))))", x=1) is True
    assert ev("\tx\r\n=\f1 ", x=1) is True
    assert ev("(x=1)AND(y=2)", x=1, y=2) is True


def test_comments_are_skipped() -> None:
    assert ev("x = 1 -- trailing comment", x=1) is True
    assert ev("x = 1 -- comment\nAND y = 2", x=1, y=2) is True
    assert ev("x = 1 -- comment\r\nAND y = 2", x=1, y=3) is False
    assert ev("/* leading */ x = /* inner */ 1", x=1) is True
    assert ev("x = 1 /* multi\nline ** comment */ AND y = 2", x=1, y=2) is True
    assert ev("x/*no space*/=1", x=1) is True


def test_empty_selector_matches_everything() -> None:
    for text in ("", "   ", "\n\t", "-- only a comment", "/* only */"):
        sel = Selector.compile(text)
        assert sel.evaluate({}) is True
        assert sel.matches({"x": 1}) is True


def test_bare_boolean_identifier_is_a_condition() -> None:
    assert ev("flag", flag=True) is True
    assert ev("flag", flag=False) is False
    assert ev("flag") is None
    assert ev("flag", flag="true") is None  # not a boolean: unknown
    assert ev("flag", flag=1) is None
    assert ev("NOT flag", flag=False) is True
    assert ev("flag AND other", flag=True, other=True) is True


def test_boolean_expressions_compare_with_equals() -> None:
    assert ev("(x = 1) = TRUE", x=1) is True
    assert ev("(x = 1) <> (y = 1)", x=1, y=2) is True
    assert ev("(x = 1) = TRUE", x=None) is None


# ----------------------------------------------------------------- tokens


def test_tokenizer_positions() -> None:
    tokens = tokenize("a <> 'b''c' AND 0x1F >= 2.5")
    kinds = [(t.kind, t.value, t.pos) for t in tokens]
    assert kinds == [
        (Kind.IDENT, "a", 0),
        (Kind.OP, "<>", 2),
        (Kind.STRING, "b'c", 5),
        (Kind.KEYWORD, "AND", 12),
        (Kind.EXACT, 31, 16),
        (Kind.OP, ">=", 21),
        (Kind.APPROX, 2.5, 24),
        (Kind.EOF, None, 27),
    ]


def test_long_or_chain_compiles_flat() -> None:
    # Programs generate long OR chains; they must not hit nesting limits.
    text = " OR ".join(f"x = {i}" for i in range(2000))
    sel = Selector.compile(text)
    assert sel.evaluate({"x": 1999}) is True
    assert sel.evaluate({"x": -1}) is False
    assert sel.evaluate({}) is None
