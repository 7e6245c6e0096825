"""AMQP 1.0 values that Python has no exact type for.

The decoder returns plain Python values where that loses nothing a broker needs
(str for string, int for uint, bytes for binary). Where the wire type matters
when we encode again (a symbol is not a string, a ulong descriptor is not an
int32) or to selectors (an int adds as a Java int and wraps, a long does not; a
float is not a double) these small wrappers say which one is meant. The narrow
ones subclass the kernel's `Int32`/`Float32`, so selectors apply Java's rules
to them (byte, short, ubyte, ushort and int are Java ints; float a Java float).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from relaymq.model.jtypes import Float32, Int32, register_numeric_types


class Symbol(str):
    """An AMQP symbol (ASCII); a `str` everywhere else."""

    __slots__ = ()


class ULong(int):
    """An unsigned 64-bit integer (descriptors, message-ids)."""

    __slots__ = ()


class UInt(int):
    __slots__ = ()


class UByte(Int32):
    __slots__ = ()


class UShort(Int32):
    __slots__ = ()


class Long(int):
    __slots__ = ()


class Byte(Int32):
    __slots__ = ()


class Short(Int32):
    __slots__ = ()


class Int(Int32):
    """An AMQP int (signed 32-bit)."""

    __slots__ = ()


class Timestamp(int):
    """Milliseconds since the epoch."""

    __slots__ = ()


class Char(str):
    __slots__ = ()


class Float(Float32):
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


# Compiled selectors compare these on their fast paths, like the kernel's own types.
register_numeric_types(UByte, UShort, Byte, Short, Int, Float, Long, ULong, Timestamp, UInt)
