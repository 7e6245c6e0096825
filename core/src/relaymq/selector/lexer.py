"""Tokenizer for JMS 1.1 message selectors.

Hand-written rather than regex-driven so that every rejection carries the exact
offset of the offending character, and so that numeric literals follow the Java
literal rules the JMS specification points to (hex, octal, ``L`` suffix,
``F``/``D`` suffixes, exponents) instead of Python's.
"""

from __future__ import annotations

import struct
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from relaymq.model.jtypes import INT_MAX, INT_MIN, Float32, Int32
from relaymq.selector.errors import InvalidSelector

#: Words that can never be identifiers (JMS 1.1 section 3.8.1.1). Matched
#: case-insensitively.
KEYWORDS = frozenset(
    {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"}
)

#: Largest magnitude of an exact literal; 2**63 itself is only legal negated.
LONG_MIN_MAGNITUDE = 2**63
_LONG_RANGE = 2**64

# Exact literals longer than this cannot fit in a long whatever their digits;
# rejecting them early also keeps int() away from Python's digit-count limit.
_MAX_EXACT_DIGITS = 24

_WHITESPACE = frozenset(" \t\n\r\f")
_DIGITS = frozenset("0123456789")
_OCTAL = frozenset("01234567")
_HEX = frozenset("0123456789abcdefABCDEF")
_ASCII_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$")
_ASCII_IDENT_PART = _ASCII_IDENT_START | _DIGITS
_OPERATORS_2 = frozenset({"<>", "<=", ">="})
_OPERATORS_1 = frozenset("=<>+-*/%(),")


class Kind(Enum):
    """Token categories the parser dispatches on."""

    STRING = "string literal"
    EXACT = "exact numeric literal"
    APPROX = "approximate numeric literal"
    IDENT = "identifier"
    KEYWORD = "keyword"
    OP = "operator"
    EOF = "end of selector"


@dataclass(frozen=True, slots=True)
class Token:
    """One lexical unit.

    ``value`` is the decoded value: the string contents, the numeric value, the
    upper-cased keyword, the identifier name or the operator symbol.
    ``negatable_only`` marks the decimal literal 9223372036854775808, which
    (as in Java) is only valid as the operand of unary minus.
    """

    kind: Kind
    value: object
    pos: int
    end: int
    negatable_only: bool = False

    def describe(self) -> str:
        """Human-readable form for error messages."""
        if self.kind is Kind.EOF:
            return "end of selector"
        if self.kind is Kind.KEYWORD:
            return f"keyword {self.value}"
        if self.kind is Kind.OP:
            return f"'{self.value}'"
        if self.kind is Kind.IDENT:
            return f"identifier {self.value}"
        return self.kind.value


def is_ident_start(ch: str) -> bool:
    """Approximates ``Character.isJavaIdentifierStart`` (letters, ``_``, ``$``, currency)."""
    if ch in _ASCII_IDENT_START:
        return True
    if ch < "\x80":
        return False
    return ch.isidentifier() or unicodedata.category(ch) in ("Sc", "Pc")


def is_ident_part(ch: str) -> bool:
    """Approximates ``Character.isJavaIdentifierPart`` (start chars, digits, marks)."""
    if ch in _ASCII_IDENT_PART:
        return True
    if ch < "\x80":
        return False
    return ("a" + ch).isidentifier() or unicodedata.category(ch) in ("Sc", "Pc")


def tokenize(text: str) -> list[Token]:
    """Split selector text into tokens, ending with an EOF token.

    Raises InvalidSelector for characters or literals that cannot start a
    token, with the offset of the first bad character.
    """
    return list(iter_tokens(text))


def iter_tokens(text: str) -> Iterator[Token]:
    """`tokenize`, one token at a time: the parser takes tokens as it goes, so
    a selector that fails early (nested too deep, too many terms) costs no
    more than its bad prefix, however long the rest."""
    i = 0
    n = len(text)
    while True:
        i = _skip_blanks(text, i)
        if i >= n:
            yield Token(Kind.EOF, None, n, n)
            return
        ch = text[i]
        if ch == "'":
            tok = _lex_string(text, i)
        elif ch in _DIGITS or (ch == "." and i + 1 < n and text[i + 1] in _DIGITS):
            tok = _lex_number(text, i)
        elif is_ident_start(ch):
            j = i + 1
            while j < n and is_ident_part(text[j]):
                j += 1
            word = text[i:j]
            upper = word.upper()
            if upper in KEYWORDS:
                tok = Token(Kind.KEYWORD, upper, i, j)
            else:
                tok = Token(Kind.IDENT, word, i, j)
        elif text[i : i + 2] == "!=":
            raise InvalidSelector("'!=' is not a selector operator (use '<>')", i, text)
        elif text[i : i + 2] == "==":
            raise InvalidSelector("'==' is not a selector operator (use '=')", i, text)
        elif text[i : i + 2] in _OPERATORS_2:
            tok = Token(Kind.OP, text[i : i + 2], i, i + 2)
        elif ch in _OPERATORS_1:
            tok = Token(Kind.OP, ch, i, i + 1)
        else:
            raise InvalidSelector(f"unexpected character {ch!r}", i, text)
        yield tok
        i = tok.end


def _skip_blanks(text: str, i: int) -> int:
    """Skip whitespace and SQL comments (an ActiveMQ extension)."""
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in _WHITESPACE:
            i += 1
        elif ch == "-" and text.startswith("--", i):
            # Line comment: runs to the end of the line or of the text.
            while i < n and text[i] not in "\r\n":
                i += 1
        elif ch == "/" and text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close < 0:
                raise InvalidSelector("unterminated /* comment", i, text)
            i = close + 2
        else:
            break
    return i


def _lex_string(text: str, start: int) -> Token:
    """A quoted string; a doubled quote stands for one quote character."""
    parts: list[str] = []
    i = start + 1
    n = len(text)
    while True:
        close = text.find("'", i)
        if close < 0:
            raise InvalidSelector("unterminated string literal", start, text)
        parts.append(text[i:close])
        if close + 1 < n and text[close + 1] == "'":
            parts.append("'")
            i = close + 2
            continue
        return Token(Kind.STRING, "".join(parts), start, close + 1)


def _lex_number(text: str, start: int) -> Token:
    """Exact (decimal, hex, octal; optional L) or approximate (Java float syntax) literal."""
    n = len(text)
    if text.startswith(("0x", "0X"), start):
        j = start + 2
        while j < n and text[j] in _HEX:
            j += 1
        digits = text[start + 2 : j]
        if not digits:
            raise InvalidSelector("hexadecimal literal needs at least one digit", start, text)
        long_suffix = j < n and text[j] in "lL"
        if long_suffix:
            j += 1
        _check_number_end(text, j)
        if len(digits.lstrip("0")) > 16:
            raise InvalidSelector("hexadecimal literal does not fit in a long", start, text)
        return Token(Kind.EXACT, _exact(_as_long_bits(int(digits, 16)), long_suffix), start, j)

    j = start
    while j < n and text[j] in _DIGITS:
        j += 1
    int_end = j
    approximate = False
    if j < n and text[j] == ".":
        approximate = True
        j += 1
        while j < n and text[j] in _DIGITS:
            j += 1
    if j < n and text[j] in "eE":
        k = j + 1
        if k < n and text[k] in "+-":
            k += 1
        if k < n and text[k] in _DIGITS:
            while k < n and text[k] in _DIGITS:
                k += 1
            approximate = True
            j = k
        else:
            raise InvalidSelector("exponent of a numeric literal needs digits", j, text)
    mantissa_end = j
    suffix = ""
    if j < n and text[j] in "fFdD":
        suffix = text[j].upper()
        approximate = True
        j += 1
    elif not approximate and j < n and text[j] in "lL":
        suffix = "L"
        j += 1
    _check_number_end(text, j)

    if approximate:
        return Token(Kind.APPROX, _approx_value(text, start, mantissa_end, suffix), start, j)
    digits = text[start:int_end]
    if len(digits) > 1 and digits[0] == "0":
        for k, d in enumerate(digits):
            if d not in _OCTAL:
                raise InvalidSelector(f"invalid digit {d!r} in octal literal", start + k, text)
        if len(digits.lstrip("0")) > 22:
            raise InvalidSelector("octal literal does not fit in a long", start, text)
        return Token(Kind.EXACT, _exact(_as_long_bits(int(digits, 8)), suffix == "L"), start, j)
    if len(digits) > _MAX_EXACT_DIGITS:
        raise InvalidSelector("exact numeric literal does not fit in a long", start, text)
    value = int(digits)
    if value > LONG_MIN_MAGNITUDE:
        raise InvalidSelector("exact numeric literal does not fit in a long", start, text)
    return Token(
        Kind.EXACT,
        _exact(value, suffix == "L"),
        start,
        j,
        negatable_only=value == LONG_MIN_MAGNITUDE,
    )


def _exact(value: int, long_suffix: bool) -> int:
    """The literal's Java type: an int when it fits (as ActiveMQ types literals), else a long.

    An ``L`` suffix makes a long whatever the value, as in Java.
    """
    if not long_suffix and INT_MIN <= value <= INT_MAX:
        return Int32(value)
    return value


def _check_number_end(text: str, j: int) -> None:
    """Reject '1abc' and '1.2.3': a literal must not run into a name or another literal."""
    if j < len(text) and (is_ident_part(text[j]) or text[j] == "."):
        raise InvalidSelector(f"unexpected character {text[j]!r} in numeric literal", j, text)


def _as_long_bits(value: int) -> int:
    """Hex and octal literals spell 64-bit patterns, as Java long literals do."""
    if value >= _LONG_RANGE:
        raise OverflowError(value)  # pragma: no cover - guarded by digit counts
    return value - _LONG_RANGE if value >= LONG_MIN_MAGNITUDE else value


def _approx_value(text: str, start: int, end: int, suffix: str) -> float:
    """Decode a floating-point literal; out-of-range values are compile errors, as in Java."""
    mantissa = text[start:end]
    value = float(mantissa)
    nonzero = any(c in "123456789" for c in mantissa.split("e")[0].split("E")[0])
    if suffix == "F":
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            raise InvalidSelector("float literal is too large for a float", start, text) from None
    if value == float("inf"):
        raise InvalidSelector("approximate numeric literal is too large for a double", start, text)
    if value == 0.0 and nonzero:
        raise InvalidSelector(
            "approximate numeric literal is too small (rounds to zero)", start, text
        )
    return Float32(value) if suffix == "F" else value
