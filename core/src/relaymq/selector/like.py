"""LIKE pattern translation.

Patterns are turned into the cheapest Python test that is exact: equality,
``startswith``, ``endswith``, substring, length check, one anchored regular
expression (patterns with at most one ``%``), or a chunk matcher built from
fixed-length regular expressions (several ``%``). Every literal character is
escaped, so ``.``, ``*``, ``[`` and friends in a pattern mean themselves.

Escape handling follows ActiveMQ, which is what JMS clients have been tested
against: the escape character only escapes a following ``_``, ``%`` or another
escape character; elsewhere it stands for itself (and if it is itself ``%`` or
``_`` it keeps its wildcard meaning there).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final


class Wildcard:
    """A wildcard marker in a parsed pattern (distinct from any literal text)."""

    __slots__ = ("symbol",)

    def __init__(self, symbol: str) -> None:
        self.symbol = symbol

    def __repr__(self) -> str:
        return f"Wildcard({self.symbol!r})"


ANY_ONE: Final = Wildcard("_")
ANY_RUN: Final = Wildcard("%")

Segment = str | Wildcard


def parse_like(pattern: str, escape: str | None) -> list[Segment]:
    """Split a LIKE pattern into literal runs and wildcard markers."""
    out: list[Segment] = []
    literal: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if (
            escape is not None
            and c == escape
            and i + 1 < n
            and pattern[i + 1] in ("_", "%", escape)
        ):
            literal.append(pattern[i + 1])
            i += 2
            continue
        if c == "%" or c == "_":
            if literal:
                out.append("".join(literal))
                literal = []
            marker = ANY_RUN if c == "%" else ANY_ONE
            if not (marker is ANY_RUN and out and out[-1] is ANY_RUN):
                out.append(marker)  # '%%' unescaped is the same as '%'
        else:
            literal.append(c)
        i += 1
    if literal:
        out.append("".join(literal))
    return out


@dataclass(frozen=True, slots=True)
class LikePlan:
    """How to test a string against a pattern.

    ``kind`` is one of: ``equals``, ``prefix``, ``suffix``, ``contains``,
    ``affixes`` (``text%suffix``), ``any`` (pattern '%'), ``length`` (only
    '_'), ``regex`` (``matcher`` is a compiled ``fullmatch``, returning a match
    or None) or ``general`` (``matcher`` returns a bool).
    """

    kind: str
    text: str = ""
    suffix: str = ""
    length: int = 0
    matcher: Callable[[str], object] | None = None


def plan_like(pattern: str, escape: str | None) -> LikePlan:
    """Choose the fastest exact matching strategy for a pattern."""
    segments = parse_like(pattern, escape)
    if all(isinstance(s, str) for s in segments):
        return LikePlan("equals", "".join(s for s in segments if isinstance(s, str)))
    if segments == [ANY_RUN]:
        return LikePlan("any")
    if all(s is ANY_ONE for s in segments):
        return LikePlan("length", length=len(segments))
    if len(segments) == 2 and segments[1] is ANY_RUN and isinstance(segments[0], str):
        return LikePlan("prefix", segments[0])
    if len(segments) == 2 and segments[0] is ANY_RUN and isinstance(segments[1], str):
        return LikePlan("suffix", segments[1])
    if (
        len(segments) == 3
        and segments[0] is ANY_RUN
        and segments[2] is ANY_RUN
        and isinstance(segments[1], str)
    ):
        return LikePlan("contains", segments[1])
    if (
        len(segments) == 3
        and isinstance(segments[0], str)
        and segments[1] is ANY_RUN
        and isinstance(segments[2], str)
    ):
        return LikePlan("affixes", segments[0], suffix=segments[2])
    if sum(1 for s in segments if s is ANY_RUN) <= 1:
        # With at most one '%' a single anchored regex cannot backtrack
        # badly (O(len(text) * len(pattern))) and runs entirely in C.
        regex = re.compile(like_regex(segments), re.DOTALL)
        return LikePlan("regex", matcher=regex.fullmatch)
    return LikePlan("general", matcher=make_matcher(segments))


def like_regex(segments: list[Segment]) -> str:
    """Regular expression source for segments, to be used with ``fullmatch``."""
    parts = []
    for s in segments:
        if isinstance(s, str):
            parts.append(re.escape(s))
        else:
            parts.append(".*" if s is ANY_RUN else ".")
    return "".join(parts)


def make_matcher(segments: list[Segment]) -> Callable[[str], bool]:
    """A matcher that runs in O(len(text) * len(pattern)) whatever the pattern.

    A single backtracking regular expression (``.*a.*a.*b``) can take
    polynomial time of high degree on hostile message values; a selector is
    chosen by one client and the value by another, so RelayMQ never builds
    one. Instead the pattern is cut at each ``%`` into fixed-length chunks
    (literals and ``_``). The first chunk must match at the start, the last
    at the end, and each chunk in between is found leftmost-first: for
    patterns whose only variable-length wildcard is ``%``, the leftmost
    placement never rules out a match that a later placement would allow.
    """
    chunks: list[list[Segment]] = [[]]
    for s in segments:
        if s is ANY_RUN:
            chunks.append([])
        else:
            chunks[-1].append(s)
    compiled = [(_chunk_regex(c), _chunk_length(c)) for c in chunks]
    if len(compiled) == 1:
        only, _ = compiled[0]
        return lambda text: only.fullmatch(text) is not None

    (head, head_len), middle, (tail, tail_len) = compiled[0], compiled[1:-1], compiled[-1]

    def match(text: str) -> bool:
        end = len(text) - tail_len
        if end < head_len:
            return False
        if head_len and head.match(text) is None:
            return False
        if tail_len and tail.fullmatch(text, end) is None:
            return False
        position = head_len
        for chunk, length in middle:
            if not length:
                continue
            found = chunk.search(text, position, end)
            if found is None:
                return False
            position = found.end()
        return True

    return match


def _chunk_regex(chunk: list[Segment]) -> re.Pattern[str]:
    parts = [re.escape(s) if isinstance(s, str) else "." for s in chunk]
    return re.compile("".join(parts), re.DOTALL)


def _chunk_length(chunk: list[Segment]) -> int:
    return sum(len(s) if isinstance(s, str) else 1 for s in chunk)
