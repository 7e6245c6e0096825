"""Artemis address wildcards, as federation policies and ``<sender>`` /
``<receiver>`` / ``<peer>`` ``address-match`` use them.

Artemis: words are separated by ``.``; ``*`` matches exactly one word and
``#`` any number of words, none included (``news.#`` matches ``news``,
``news.eu`` and ``news.eu.sport``). ActiveMQ (and RelayMQ destination names)
write the same idea as ``*`` (one word) and ``>`` (the rest, at least one
word); `from_activemq` translates such a pattern for the one place that needs it.
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    words = pattern.split(".")
    parts: list[str] = []
    for i, word in enumerate(words):
        first = i == 0
        if word == "#":
            # zero or more words: absorb the separator on one side
            parts.append(r"(?:[^.]*(?:\.[^.]*)*)?" if first else r"(?:\.[^.]*)*")
            continue
        piece = "[^.]+" if word == "*" else re.escape(word)
        parts.append(piece if first else r"\." + piece)
    regex = "".join(parts)
    if words and words[0] == "#" and len(words) > 1:
        # "#.x": the leading words (if any) end with a separator before x
        regex = r"(?:[^.]+\.)*" + "".join(parts[1:])[2:]
    return re.compile(regex + r"\Z")


def matches(pattern: str, name: str) -> bool:
    """Whether the Artemis address pattern `pattern` matches `name`."""
    if pattern == "#":
        return True
    return _compile(pattern).match(name) is not None


def from_activemq(pattern: str) -> str:
    """An ActiveMQ wildcard (``>``: one or more trailing words) in Artemis' syntax."""
    words = pattern.split(".")
    if words and words[-1] == ">":
        return ".".join(words[:-1] + ["*", "#"])
    return pattern


class Matcher:
    """Include/exclude address patterns: a name is selected when some include
    matches and no exclude does (no include: nothing is selected)."""

    def __init__(self, includes: list[str], excludes: list[str]) -> None:
        self.includes = list(includes)
        self.excludes = list(excludes)

    def __call__(self, name: str) -> bool:
        return any(matches(p, name) for p in self.includes) and \
            not any(matches(p, name) for p in self.excludes)
