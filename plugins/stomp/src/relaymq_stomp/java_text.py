"""Property values as ActiveMQ writes them into STOMP headers: Java's `toString()`.

A STOMP MESSAGE header is text; ActiveMQ writes a non-string property with the
value's `toString()`. Strings, integers and uuids read the same in Python, the
rest do not:

- doubles and AMQP floats (32 bits) as `Double.toString` / `Float.toString`
  (the kernel's `relaymq.model.java_numbers`, which selectors use too):
  `1.0E20`, `1.5E-5`, `1.1` for the float, not the double it widens to;
- lists as `[a, b]` and maps as `{k=v, k2=v2}`, their elements the same way;
  `null`, `true`, `false` inside them.
"""

from __future__ import annotations

from typing import Any

from relaymq.model.java_numbers import java_double_string, java_float_string
from relaymq.model.jtypes import Float32


def java_double(value: float) -> str:
    """`Double.toString` (or `Float.toString` for a `Float32`)."""
    if isinstance(value, Float32):
        return java_float_string(float(value))
    return java_double_string(float(value))


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
