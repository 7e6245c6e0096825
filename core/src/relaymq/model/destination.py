"""Destinations: queues and topics with ActiveMQ naming and wildcards.

Names are `.`-separated segments. In a subscription or policy, `*` matches one
segment and `>` matches the rest (including nothing, so `X.>` matches `X`), as in
ActiveMQ. Artemis' `#` is accepted as a synonym of `>` where Artemis config uses it.
A comma separates the parts of a composite destination.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final


class DestinationKind(enum.Enum):  # noqa: D101
    QUEUE = "queue"
    TOPIC = "topic"
    TEMP_QUEUE = "temp-queue"
    TEMP_TOPIC = "temp-topic"


_QUEUE_KINDS: Final = (DestinationKind.QUEUE, DestinationKind.TEMP_QUEUE)
_PREFIXES: Final = {
    "queue://": DestinationKind.QUEUE,
    "topic://": DestinationKind.TOPIC,
    "temp-queue://": DestinationKind.TEMP_QUEUE,
    "temp-topic://": DestinationKind.TEMP_TOPIC,
}


class InvalidDestination(ValueError):
    """A destination name that RelayMQ cannot accept (empty, or an unknown prefix)."""


@dataclass(frozen=True, slots=True)
class Destination:
    """A queue or topic by kind and name; hashable, cheap to compare.

    The hash and the wildcard/composite flags are computed once: destinations are
    looked up in dicts on every send.
    """

    kind: DestinationKind
    name: str
    _hash: int = field(init=False, repr=False, compare=False)
    #: the kind's family and the name's shape, as plain fields (read on every send)
    is_queue: bool = field(init=False, repr=False, compare=False)
    is_topic: bool = field(init=False, repr=False, compare=False)
    is_temporary: bool = field(init=False, repr=False, compare=False)
    is_wildcard: bool = field(init=False, repr=False, compare=False)
    is_composite: bool = field(init=False, repr=False, compare=False)
    #: a stable string form, `queue://NAME`; the store key
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise InvalidDestination("a destination name must not be empty")
        init = object.__setattr__
        init(self, "_hash", hash((self.kind, self.name)))
        queue = self.kind in _QUEUE_KINDS
        init(self, "is_queue", queue)
        init(self, "is_topic", not queue)
        init(self, "is_temporary", self.kind in (DestinationKind.TEMP_QUEUE,
                                                 DestinationKind.TEMP_TOPIC))
        init(self, "is_wildcard", is_wildcard(self.name))
        init(self, "is_composite", "," in self.name)
        init(self, "key", f"{self.kind.value}://{self.name}")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Destination):
            return NotImplemented
        return self._hash == other._hash and self.name == other.name and self.kind is other.kind

    @classmethod
    def queue(cls, name: str) -> Destination:
        return cls(DestinationKind.QUEUE, name)

    @classmethod
    def topic(cls, name: str) -> Destination:
        return cls(DestinationKind.TOPIC, name)

    @classmethod
    def parse(cls, text: str, default: DestinationKind = DestinationKind.QUEUE) -> Destination:
        """Parse `queue://X`, `topic://X`, `temp-queue://X`, `temp-topic://X` or a bare name."""
        return _parse(text, default)

    def composite_parts(self) -> list[Destination]:
        """The parts of a composite name; each part may carry its own prefix."""
        parts = [p.strip() for p in self.name.split(",")]
        return [Destination.parse(p, self.kind) for p in parts if p]

    def matches(self, other: Destination) -> bool:
        """True when this (possibly wildcard) destination covers `other` of the same family."""
        return self.is_queue == other.is_queue and name_matches(self.name, other.name)

    def __str__(self) -> str:
        return self.key


@lru_cache(maxsize=8192)
def _parse(text: str, default: DestinationKind) -> Destination:
    for prefix, kind in _PREFIXES.items():
        if text.startswith(prefix):
            return Destination(kind, text[len(prefix):])
    return Destination(default, text)


def is_wildcard(name: str) -> bool:
    return any(seg in ("*", ">", "#") for seg in name.split("."))


@lru_cache(maxsize=16384)
def name_matches(pattern: str, name: str) -> bool:
    """ActiveMQ wildcard match: `*` one segment, `>` (or `#`) the rest, possibly none."""
    if pattern == name:
        return True
    return _match(pattern.split("."), name.split("."))


def _match(pat: list[str], segs: list[str]) -> bool:
    i = 0
    for i, p in enumerate(pat):
        if p in (">", "#"):
            return True
        if i >= len(segs):
            return False
        if p != "*" and p != segs[i]:
            return False
    return len(pat) == len(segs)
