"""Java's text for floating-point values: `Double.toString` and `Float.toString`.

Selectors (`REGEX` on a number, string conversion) and transports that write a
property as text (STOMP headers) show a double or float as Java does:

- plain digits from 10^-3 up to 10^7 (`1234.5`, `0.001`, `100.0`), `d.dddE±n`
  outside that range (`1.0E20`, `1.5E-5`); `NaN`, `Infinity`, `-0.0`;
- the fewest digits that read back as the same value: as a double, or for a
  `float` (a `Float32`) as the same 32-bit float, so `1.1`, not the double it
  widens to (`1.100000023841858`);
- where one digit would name the value, the two-digit decimal nearest to it, as
  Java does since JDK 19: `Double.MIN_VALUE` is `4.9E-324`, `Float.MIN_VALUE`
  `1.4E-45`.
"""

from __future__ import annotations

import math
from decimal import Decimal

from relaymq.model.jtypes import to_float32


def java_double_string(d: float) -> str:
    """``Double.toString(d)``."""
    special = _special(d)
    if special is not None:
        return special
    return _layout(d, repr(d))


def java_float_string(f: float) -> str:
    """``Float.toString(f)`` for `f`, a 32-bit float widened to a double."""
    special = _special(f)
    if special is not None:
        return special
    for precision in range(1, 10):
        text = f"{f:.{precision}g}"
        try:
            if to_float32(float(text)) == f:
                return _layout(f, text)
        except OverflowError:  # rounded past the largest float
            continue
    return _layout(f, repr(f))  # pragma: no cover - 9 digits always read back


def _special(d: float) -> str | None:
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0.0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    return None


def _layout(d: float, shortest: str) -> str:
    """Java's layout of `d` from its shortest decimal text."""
    number = Decimal(shortest)
    if len(number.normalize().as_tuple().digits) == 1:
        number = Decimal(f"{d:.1e}")  # one digit names it: the nearest two instead
    sign, digit_tuple, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite
    all_digits = "".join(map(str, digit_tuple))
    digits = all_digits.rstrip("0") or "0"
    point = len(all_digits) + exponent  # how many digits stand before the point
    if 1e-3 <= abs(d) < 1e7:
        if point <= 0:
            text = "0." + "0" * -point + digits
        elif point >= len(digits):
            text = digits + "0" * (point - len(digits)) + ".0"
        else:
            text = digits[:point] + "." + digits[point:]
    else:
        text = f"{digits[0]}.{digits[1:] or '0'}E{point - 1}"
    return ("-" if sign else "") + text


__all__ = ["java_double_string", "java_float_string"]
