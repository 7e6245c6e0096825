"""AMQP 1.0 values that Python has no exact type for.

The decoder returns plain Python values where that loses nothing a broker needs
(str for string, int for every integer width, bytes for binary). Where the wire
type matters when we encode again (a symbol is not a string, a ulong descriptor
is not an int32) these small wrappers say which one is meant.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Symbol(str):
    """An AMQP symbol (ASCII); a `str` everywhere else."""

    __slots__ = ()


class ULong(int):
    """An unsigned 64-bit integer (descriptors, message-ids)."""

    __slots__ = ()


class UInt(int):
    __slots__ = ()


class UByte(int):
    __slots__ = ()


class UShort(int):
    __slots__ = ()


class Long(int):
    __slots__ = ()


class Byte(int):
    __slots__ = ()


class Short(int):
    __slots__ = ()


class Timestamp(int):
    """Milliseconds since the epoch."""

    __slots__ = ()


class Char(str):
    __slots__ = ()


class Float(float):
    __slots__ = ()


class Described(NamedTuple):
    """A described value: `descriptor` is a ULong code or a Symbol name."""

    descriptor: Any
    value: Any


class Array(list):  # type: ignore[type-arg]
    """An AMQP array: every element has one type, given by `code` (a constructor byte)."""

    __slots__ = ("code",)

    def __init__(self, code: int, items: Any = ()) -> None:
        super().__init__(items)
        self.code = code


class RawValue(bytes):
    """Bytes that are already an encoded AMQP value; the encoder copies them as they are."""

    __slots__ = ()
