"""The constructors of the per-message change-feed events (compiled).

`MessageAdded` and `MessageRemoved` are made once per message and subscriber
kind on the hot path, so they are not made through the dataclasses' own
``__init__`` (a frozen dataclass sets each field through `object.__setattr__`,
about twice the cost): an instance is allocated and its slots are filled through
the slot descriptors. The result is an ordinary `MessageAdded` /
`MessageRemoved` (it compares, prints and refuses assignment like any frozen
dataclass).

This module is the one home of these constructors: the store writer, local
transactions, dead-letter moves and durable cursors all call it. It sits below
the feed and the writer (it imports only the event classes and the model) and
is compiled, so compiled callers make an event without an interpreted frame.
"""

from __future__ import annotations

from typing import Any, Final

from relaymq.feed.events import MessageAdded, MessageRemoved
from relaymq.model.destination import Destination
from relaymq.model.message import Message

# Module-level finals: the compiled build keeps them in C globals (no dict lookup).
_NEW: Final[Any] = object.__new__
_A_MESSAGE: Final[Any] = MessageAdded.__dict__["message"].__set__
_A_DESTINATION: Final[Any] = MessageAdded.__dict__["destination"].__set__
_A_PLACEMENTS: Final[Any] = MessageAdded.__dict__["placements"].__set__
_A_ORIGIN: Final[Any] = MessageAdded.__dict__["origin"].__set__
_R_MESSAGE: Final[Any] = MessageRemoved.__dict__["message"].__set__
_R_DESTINATION: Final[Any] = MessageRemoved.__dict__["destination"].__set__
_R_KEY: Final[Any] = MessageRemoved.__dict__["key"].__set__
_R_SEQ: Final[Any] = MessageRemoved.__dict__["seq"].__set__
_R_REASON: Final[Any] = MessageRemoved.__dict__["reason"].__set__
_R_ORIGIN: Final[Any] = MessageRemoved.__dict__["origin"].__set__


def added(message: Message, destination: Destination,
          placements: tuple[tuple[str, int], ...], origin: str | None) -> MessageAdded:
    """`MessageAdded(message, destination, placements, origin)`, made faster."""
    ev = _NEW(MessageAdded)
    _A_MESSAGE(ev, message)
    _A_DESTINATION(ev, destination)
    _A_PLACEMENTS(ev, placements)
    _A_ORIGIN(ev, origin)
    return ev  # type: ignore[no-any-return]


def removed(message: Message, destination: Destination, key: str, seq: int, reason: str,
            origin: str | None) -> MessageRemoved:
    """`MessageRemoved(message, destination, key, seq, reason, origin)`, made faster."""
    ev = _NEW(MessageRemoved)
    _R_MESSAGE(ev, message)
    _R_DESTINATION(ev, destination)
    _R_KEY(ev, key)
    _R_SEQ(ev, seq)
    _R_REASON(ev, reason)
    _R_ORIGIN(ev, origin)
    return ev  # type: ignore[no-any-return]
