"""Java numeric widths for property values: int vs long, float vs double.

JMS properties are typed (byte, short, int, long, float, double) and selectors
follow Java's rules for them: two ints add as 32-bit ints and wrap, an int
compared with a float is rounded to a float first, and so on. Python has one
`int` and one `float`, so RelayMQ marks the narrow Java types:

* a plain `int` is a Java ``long``, a plain `float` a Java ``double``;
* `Int32` is a Java ``int`` (also ``byte`` and ``short``, which selectors treat
  as ``int``, as Java's numeric promotion does);
* `Float32` is a Java ``float``: its value is the 32-bit value widened to a
  double, so ``Float32(1.1)`` is wrong and ``Float32(to_float32(1.1))`` right.

Transports that know the wire type (AMQP's int, short, float, ...) produce
these; subclasses (the AMQP plugin's ``Int``, ``Short``, ``Float``, ...) are
registered with `register_numeric_types` so compiled selectors take their fast
paths for them too. Not compiled with mypyc: these classes subclass builtins.
"""

from __future__ import annotations

import struct

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1

# Java classes of a value, as selectors see them.
OTHER = 0
I32 = 1
I64 = 2
F32 = 3
F64 = 4
STR = 5
BOOL = 6


class Int32(int):
    """A Java ``int`` (or ``byte``/``short``) value."""

    __slots__ = ()


class Float32(float):
    """A Java ``float`` value (the 32-bit value, widened to a double)."""

    __slots__ = ()


_F32 = struct.Struct("<f")

#: Type -> Java class code; filled lazily for subclasses.
_CLASS: dict[type, int] = {bool: BOOL, int: I64, float: F64, str: STR, Int32: I32, Float32: F32}

# Live sets the compiled selectors bind (registration adds to them in place).
INT_TYPES: set[type] = {int, Int32}  # exact: I32 and I64 classes
I32_TYPES: set[type] = {Int32}
FLOAT_TYPES: set[type] = {float, Float32}  # approximate: F32 and F64 classes
NUMERIC_TYPES: set[type] = INT_TYPES | FLOAT_TYPES
FLOAT_OR_I32_TYPES: set[type] = FLOAT_TYPES | I32_TYPES


def _classify(t: type) -> int:
    if issubclass(t, bool):
        return BOOL
    if issubclass(t, Int32):
        return I32
    if issubclass(t, int):
        return I64
    if issubclass(t, Float32):
        return F32
    if issubclass(t, float):
        return F64
    if issubclass(t, str):
        return STR
    return OTHER


def jclass(value: object) -> int:
    """The Java class code of a value (OTHER for None and unsupported types)."""
    t = type(value)
    code = _CLASS.get(t)
    if code is None:
        code = _classify(t)
        if len(_CLASS) < 256:
            _CLASS[t] = code
    return code


def register_numeric_types(*classes: type) -> None:
    """Let compiled selectors take their fast paths for these int/float subclasses."""
    for cls in classes:
        code = _classify(cls)
        _CLASS[cls] = code
        if code in (I32, I64):
            INT_TYPES.add(cls)
            NUMERIC_TYPES.add(cls)
            if code == I32:
                I32_TYPES.add(cls)
                FLOAT_OR_I32_TYPES.add(cls)
        elif code in (F32, F64):
            FLOAT_TYPES.add(cls)
            NUMERIC_TYPES.add(cls)
            FLOAT_OR_I32_TYPES.add(cls)


def wrap_int(value: int) -> int:
    """Java int arithmetic wraps around at 32 bits."""
    if INT_MIN <= value <= INT_MAX:
        return value
    return (value - INT_MIN) % 2**32 + INT_MIN


def wrap_long(value: int) -> int:
    """Java long arithmetic wraps around at 64 bits."""
    if LONG_MIN <= value <= LONG_MAX:
        return value
    return (value - LONG_MIN) % 2**64 + LONG_MIN


def to_float32(value: float | int) -> float:
    """Round to the nearest Java float (Java's int/long/double -> float conversion)."""
    if type(value) is not float and not isinstance(value, float):
        n = int(value)
        if -(2**53) <= n <= 2**53:
            value = float(n)  # exact, so one rounding below
        else:  # round the integer to 24 significant bits directly (no double rounding)
            sign = -1 if n < 0 else 1
            m = abs(n)
            shift = m.bit_length() - 24
            q, r = divmod(m, 1 << shift)
            half = 1 << (shift - 1)
            if r > half or (r == half and q & 1):
                q += 1
            return float(sign * (q << shift))
    try:
        return float(_F32.unpack(_F32.pack(value))[0])
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")
