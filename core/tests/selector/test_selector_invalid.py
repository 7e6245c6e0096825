"""Invalid selectors: rejected at compile time, with the offset of the problem."""

from __future__ import annotations

import pytest
from relaymq.selector import InvalidSelector, Selector
from relaymq.selector.parser import MAX_DEPTH, MAX_NESTING


def reject(text: str) -> InvalidSelector:
    with pytest.raises(InvalidSelector) as info:
        Selector.compile(text)
    return info.value


@pytest.mark.parametrize(
    ("text", "offset", "fragment"),
    [
        # lexical
        ("name = 'James", 7, "unterminated string"),
        ("x = 1 /* open", 6, "unterminated /* comment"),
        ("x = #1", 4, "unexpected character '#'"),
        ("x != 1", 2, "'!='"),
        ("name == 'James'", 5, "'=='"),
        ("1uncorrect IS NULL", 1, "numeric literal"),
        ("x = 0x", 4, "hexadecimal literal"),
        ("x = 0xZ1", 4, "hexadecimal literal"),
        ("x = 09", 5, "octal"),
        ("x = 1e", 5, "exponent"),
        ("x = 1.2.3", 7, "numeric literal"),
        ("x = 9223372036854775808", 4, "does not fit in a long"),
        ("x = 99999999999999999999999999999", 4, "does not fit in a long"),
        ("x = 0x10000000000000000", 4, "does not fit in a long"),
        ("x = 1E400", 4, "too large"),
        ("x = 1E-400", 4, "too small"),
        ("x = 1E39F", 4, "too large for a float"),
        ("x = 1E-50F", 4, "too small"),
        ("x = 1Lx", 6, "numeric literal"),
        ("x = 1.5L", 7, "numeric literal"),
        ("x = ?", 4, "unexpected character"),
        ("x = \u00a01", 4, "unexpected character"),
        # syntax
        ("", None, None),
        ("name = 'James' AND", 18, "unexpected end of selector"),
        ("AND name = 'James'", 0, "keyword AND"),
        ("name = 'a' OR OR name = 'b'", 14, "keyword OR"),
        ("name = 'James')", 14, "unbalanced ')'"),
        ("(name = 'James'", 15, "expected ')'"),
        ("NOT", 3, "unexpected end of selector"),
        ("a = 1 AMD  b = 2", 6, "identifier AMD"),
        ("a = b = c", 6, "unexpected '='"),
        ("x BETWEEN 1", 11, "expected AND"),
        ("x BETWEEN 1 OR 2", 12, "expected AND"),
        ("name LIKE", 9, "expected a string literal"),
        ("name LIKE rank", 10, "expected a string literal"),
        ("name LIKE 'a' ESCAPE", 20, "expected a string literal"),
        ("name LIKE 'a' ESCAPE '!!'", 21, "exactly one character"),
        ("name LIKE 'a' ESCAPE ''", 21, "exactly one character"),
        ("name IN 'a'", 8, "expected '('"),
        ("name IN ()", 9, "expected a string literal"),
        ("rank IN (123)", 9, "expected a string literal"),
        ("name IN ('a',)", 13, "expected a string literal"),
        ("name IN ('a' 'b')", 13, "expected ')'"),
        ("x IS 1", 5, "expected NULL"),
        ("x IS NOT 1", 9, "expected NULL"),
        ("x NOT NULL", 6, "expected BETWEEN, LIKE or IN after NOT"),
        ("x = NULL", 4, "NULL can only be used"),
        ("NULL IS NULL", 0, "NULL can only be used"),
        ("x = 1 ESCAPE '!'", 6, "keyword ESCAPE"),
        ("BETWEEN > 0", 0, "keyword BETWEEN"),
        ("IS > 0", 0, "keyword IS"),
        ("null = 1", 0, "NULL"),
        ("x = NOT y", 4, "keyword NOT"),
        ("x = ()", 5, "expected an expression"),
        # typing
        ("3+5", 0, "a selector must be a boolean"),
        ("5", 0, "a selector must be a boolean"),
        ("'text'", 0, "a selector must be a boolean"),
        ("x + 1", 0, "a selector must be a boolean"),
        ("True AND 3+5", 9, "operand of AND"),
        ("x = 1 OR 'a'", 9, "operand of OR"),
        ("NOT 5", 4, "operand of NOT"),
        ("FALSE > 0", 0, "operand of '>'"),
        ("'abc' < 'abd'", 0, "operand of '<'"),
        ("name >= 'a'", 8, "operand of '>='"),
        ("(x = 1) < 2", 1, "operand of '<'"),
        ("name BETWEEN 'A' AND 'Z'", 13, "lower bound of BETWEEN"),
        ("x BETWEEN 1 AND 'Z'", 16, "upper bound of BETWEEN"),
        ("'a' BETWEEN 1 AND 2", 0, "operand of BETWEEN"),
        ("TRUE BETWEEN 1 AND 2", 0, "operand of BETWEEN"),
        ("5 LIKE 'a'", 0, "operand of LIKE"),
        ("(x = 1) LIKE 'a'", 1, "operand of LIKE"),
        ("x + 1 - 2 IN ('a')", 0, "operand of IN"),
        ("'a' * 2 = 1", 0, "operand of '*'"),
        ("x - 'a' = 1", 4, "operand of '-'"),
        ("TRUE + 1 = 2", 0, "operand of '+'"),
        ("'a' + 1 = 'a1'", 4, "'+' adds two numbers or concatenates two strings"),
        ("-'a' = 1", 1, "operand of unary '-'"),
        ("-TRUE", 1, "operand of unary '-'"),
        # functions
        ("NOSUCH(x)", 0, "unknown function NOSUCH"),
        ("REGEX('a')", 0, "REGEX takes 2 arguments, got 1"),
        ("REGEX('a', x, y)", 0, "REGEX takes 2 arguments, got 3"),
        ("REGEX('[', x)", 6, "invalid regular expression"),
        ("REGEX(1, x)", 6, "argument 1 of REGEX"),
        ("INLIST('a', x)", 7, "argument 1 of INLIST must be a list"),
        ("INLIST(x, 'a')", 7, "argument 1 of INLIST must be a list"),
        ("INLIST(MAKELIST('a'), MAKELIST('a'))", 22, "argument 2 of INLIST"),
        ("SPLIT('a', ',') = 'a'", 0, "operand of '='"),
        ("INLIST(SPLIT('a', '('), x)", 18, "invalid regular expression"),
        ("INLIST(SPLIT(1, ','), x)", 13, "argument 1 of SPLIT"),
        ("INLIST(SPLIT('a', ',', 'x'), x)", 23, "argument 3 of SPLIT"),
        ("INLIST(SPLIT('a'), x)", 7, "SPLIT takes 2 to 3 arguments, got 1"),
        ("MAKELIST('a')", 0, "a selector must be a boolean"),
        ("INLIST(MAKELIST(SPLIT('a', ',')), x)", 16, "argument 1 of MAKELIST"),
        ("REGEX('a', x", 12, "expected ')'"),
        ("SPLIT('a', ',') IS NULL", 0, "operand of IS NULL"),
    ],
)
def test_invalid_selectors_report_offset(
    text: str, offset: int | None, fragment: str | None
) -> None:
    if offset is None:  # the empty selector is valid (JMS: no selector)
        Selector.compile(text)
        return
    error = reject(text)
    assert isinstance(error, ValueError)
    assert error.offset == offset, str(error)
    assert fragment in error.reason, str(error)
    assert f"at offset {offset}" in str(error)
    assert error.text == text


def test_message_shows_the_neighbourhood_of_the_error() -> None:
    text = "a = 1 AND " * 10 + "b = = 2"
    error = reject(text)
    assert error.offset == len(text) - 3
    message = str(error)
    assert message.startswith("expected an expression, found '=' at offset")
    assert message.endswith("b = = 2")
    assert "..." in message


def test_errors_are_not_cached_as_selectors() -> None:
    for _ in range(3):
        reject("x =")


def test_nesting_limit() -> None:
    ok = "(" * MAX_NESTING + "x = 1" + ")" * MAX_NESTING
    assert Selector.compile(ok).evaluate({"x": 1}) is True
    error = reject("(" * (MAX_NESTING + 1) + "x = 1" + ")" * (MAX_NESTING + 1))
    assert "nests" in error.reason
    reject("NOT " * (MAX_NESTING + 1) + "x")
    reject("x = " + "-" * (MAX_NESTING + 1) + "1")
    reject("(" * 5000 + "x")


def test_depth_limit() -> None:
    chain = "x = " + " + ".join(["1"] * (MAX_DEPTH - 1))
    assert Selector.compile(chain).evaluate({"x": MAX_DEPTH - 1}) is True
    error = reject("x = " + " + ".join(["1"] * (MAX_DEPTH + 1)))
    assert "nested more than" in error.reason


def test_deepest_accepted_trees_still_compile() -> None:
    # The worst shapes for generated-code nesting, right at the limits.
    half = MAX_NESTING // 2
    texts = [
        "(" * half + "x = 1" + ") = TRUE" * half,
        "NOT (" * half + "x" + ")" * half,
        "(" * half + "x BETWEEN 1 AND 2" + " OR y LIKE 'a_b%c')" * half,
        "x = " + " * ".join(["y"] * (MAX_DEPTH - 2)),
        "REGEX('a', " * half + "x" + ") = TRUE" * 0 + ")" * half,
    ]
    for text in texts:
        try:
            sel = Selector.compile(text)
        except InvalidSelector as exc:
            # Acceptable only as a clean compile-time rejection.
            assert "too complex" in exc.reason or "nest" in exc.reason
            continue
        assert sel.evaluate({"x": 1, "y": 1}) in (True, False, None)


def test_non_string_text_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Selector.compile(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Selector.compile(b"x = 1")  # type: ignore[arg-type]
