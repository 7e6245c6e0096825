"""Property values as ActiveMQ writes them into STOMP headers: Java's `toString()`.

A STOMP MESSAGE header is text; ActiveMQ writes a non-string property with the
value's `toString()`. Strings, integers and uuids read the same in Python, the
rest do not:

- doubles as `Double.toString`: `1.0E20`, `1.5E-5`, `1234.5`, `NaN`, `Infinity`;
- AMQP floats (32 bits) as `Float.toString`, with the fewest digits that name
  that float: `1.1`, not the double it widens to (`1.100000023841858`); where one
  digit would do, the nearest two (`Float.MIN_VALUE` is `1.4E-45`), as Java does;
- lists as `[a, b]` and maps as `{k=v, k2=v2}`, their elements the same way;
  `null`, `true`, `false` inside them.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Any

from relaymq.model.jtypes import Float32


def _single(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _shortest_digits(value: float) -> str:
    """The shortest decimal that reads back as `value` (as a float when it is a
    `Float32`, else as a double)."""
    if isinstance(value, Float32):
        target = _single(value)
        for precision in range(1, 10):
            text = f"{value:.{precision}g}"
            try:
                if _single(float(text)) == target:
                    return text
            except OverflowError:  # rounded past the largest float
                continue
    return repr(float(value))


def java_double(value: float) -> str:
    """`Double.toString` (or `Float.toString` for a `Float32`)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    shortest = Decimal(_shortest_digits(value))
    if len(shortest.normalize().as_tuple().digits) == 1:
        # one digit names it: Java takes the two-digit decimal nearest the value
        # (Double.MIN_VALUE is 4.9E-324, not 5.0E-324)
        shortest = Decimal(f"{float(value):.1e}")
    sign, digit_tuple, exponent = shortest.as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)  # finite
    point = len("".join(map(str, digit_tuple))) + exponent  # digits before the point
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            text = "0." + "0" * -point + digits
        elif point >= len(digits):
            text = digits + "0" * (point - len(digits)) + ".0"
        else:
            text = digits[:point] + "." + digits[point:]
    else:
        text = f"{digits[0]}.{digits[1:] or '0'}E{point - 1}"
    return ("-" if sign else "") + text


def java_string(value: Any) -> str:
    """`String.valueOf(value)` as Java would give it for a property's value."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_string(k)}={java_string(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_string(v) for v in value) + "]"
    return str(value)


__all__ = ["java_double", "java_string"]
