"""AMQP 1.0 encoding: values, message sections and SASL frames.

Used where the broker has to produce AMQP bytes itself: a message that arrived
over another protocol (built once, from the kernel's fields), the header
section of a redelivered message (delivery-count changes, nothing else is
touched), and the SASL frames that come before the AMQP layer.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Final

from relaymq.model.jtypes import Float32

from relaymq_amqp.types import (
    Array,
    Byte,
    Char,
    Described,
    Long,
    RawValue,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

_P16: Final = struct.Struct(">H").pack
_P32: Final = struct.Struct(">I").pack
_Pi32: Final = struct.Struct(">i").pack
_P64: Final = struct.Struct(">Q").pack
_Pi64: Final = struct.Struct(">q").pack
_Pi16: Final = struct.Struct(">h").pack
_PF32: Final = struct.Struct(">f").pack
_PF64: Final = struct.Struct(">d").pack


def encode(value: Any) -> bytes:
    """The AMQP encoding of `value` (see `types` for wire-type wrappers)."""
    out = bytearray()
    _enc(value, out)
    return bytes(out)


def _enc(v: Any, out: bytearray) -> None:  # noqa: C901 - a flat dispatch on type
    if v is None:
        out.append(0x40)
    elif v is True:
        out.append(0x41)
    elif v is False:
        out.append(0x42)
    elif isinstance(v, str):
        if isinstance(v, Symbol):
            b = v.encode("ascii")
            _var(out, b, 0xA3, 0xB3)
        elif isinstance(v, Char):
            out.append(0x73)
            out += _P32(ord(v))
        else:
            _var(out, v.encode(), 0xA1, 0xB1)
    elif isinstance(v, RawValue):
        out += v
    elif isinstance(v, (bytes, bytearray, memoryview)):
        _var(out, bytes(v), 0xA0, 0xB0)
    # ints and floats by class, not isinstance(v, int): compiled code would narrow
    # v to a machine int or double there and lose UInt, Timestamp, Float and so on
    elif issubclass(cls := type(v), int):
        _enc_int(v, out)
    elif issubclass(cls, float):
        if issubclass(cls, Float32):  # an AMQP Float, or a Java float from another protocol
            out.append(0x72)
            out += _PF32(v)
        else:
            out.append(0x82)
            out += _PF64(v)
    elif isinstance(v, Described):
        out.append(0x00)
        _enc(v.descriptor, out)
        _enc(v.value, out)
    elif isinstance(v, Array):
        _enc_array(v, out)
    elif isinstance(v, (list, tuple)):
        _enc_list(v, out)
    elif isinstance(v, dict):
        _enc_map(v, out)
    elif isinstance(v, uuid.UUID):
        out.append(0x98)
        out += v.bytes
    else:
        raise TypeError(f"cannot encode {type(v).__name__} as AMQP")


def _var(out: bytearray, b: bytes, small: int, large: int) -> None:
    n = len(b)
    if n < 256:
        out.append(small)
        out.append(n)
    else:
        out.append(large)
        out += _P32(n)
    out += b


def _enc_int(v: Any, out: bytearray) -> None:  # Any: an `int` parameter would drop UInt etc. when compiled
    if isinstance(v, ULong):
        if v == 0:
            out.append(0x44)
        elif v < 256:
            out += bytes((0x53, v))
        else:
            out.append(0x80)
            out += _P64(v)
    elif isinstance(v, UInt):
        if v == 0:
            out.append(0x43)
        elif v < 256:
            out += bytes((0x52, v))
        else:
            out.append(0x70)
            out += _P32(v)
    elif isinstance(v, Timestamp):
        out.append(0x83)
        out += _Pi64(v)
    elif isinstance(v, UByte):
        out += bytes((0x50, v))
    elif isinstance(v, UShort):
        out.append(0x60)
        out += _P16(v)
    elif isinstance(v, Byte):
        out += bytes((0x51, v & 0xFF))
    elif isinstance(v, Short):
        out.append(0x61)
        out += _Pi16(v)
    elif isinstance(v, Long) or not -(2**31) <= v < 2**31:
        if -128 <= v < 128:
            out += bytes((0x55, v & 0xFF))
        elif -(2**63) <= v < 2**63:
            out.append(0x81)
            out += _Pi64(v)
        else:
            out.append(0x80)
            out += _P64(v)
    elif -128 <= v < 128:
        out += bytes((0x54, v & 0xFF))
    else:
        out.append(0x71)
        out += _Pi32(v)


def _enc_list(items: Any, out: bytearray) -> None:
    if not items:
        out.append(0x45)
        return
    body = bytearray()
    for item in items:
        _enc(item, body)
    _compound(out, body, len(items), 0xC0, 0xD0)


def _enc_map(m: dict[Any, Any], out: bytearray) -> None:
    body = bytearray()
    for k, v in m.items():
        _enc(k, body)
        _enc(v, body)
    _compound(out, body, len(m) * 2, 0xC1, 0xD1)


def _compound(out: bytearray, body: bytearray, count: int, small: int, large: int) -> None:
    if len(body) + 1 < 256 and count < 256:
        out += bytes((small, len(body) + 1, count))
    else:
        out.append(large)
        out += _P32(len(body) + 4)
        out += _P32(count)
    out += body


def _enc_array(a: Array, out: bytearray) -> None:
    code = a.code
    body = bytearray()
    for item in a:
        enc = bytearray()
        _enc(item, enc)
        if enc[0] != code:  # widen small encodings to the array's constructor
            enc = _widen(item, code)
        body += enc[1:]
    n = len(a)
    if len(body) + 2 < 256 and n < 256:
        out += bytes((0xE0, len(body) + 2, n, code))
    else:
        out.append(0xF0)
        out += _P32(len(body) + 5)
        out += _P32(n)
        out.append(code)
    out += body


def _widen(item: Any, code: int) -> bytearray:
    if code == 0xB3:
        b = str(item).encode("ascii")
        return bytearray(b"\xb3" + _P32(len(b)) + b)
    if code == 0xA3:
        b = str(item).encode("ascii")
        return bytearray(bytes((0xA3, len(b))) + b)
    if code == 0xB1:
        b = str(item).encode()
        return bytearray(b"\xb1" + _P32(len(b)) + b)
    raise TypeError(f"cannot put {item!r} in an array of type 0x{code:02x}")


def symbol_array(names: list[str]) -> Array:
    """An array of symbols, the form capabilities and SASL mechanisms take."""
    wide = any(len(n) > 255 for n in names)
    return Array(0xB3 if wide else 0xA3, [Symbol(n) for n in names])


# ---------------------------------------------------------------------------
# Message sections
# ---------------------------------------------------------------------------


def section(code: int, value: Any) -> bytes:
    """A described message section (`code` is the smallulong descriptor)."""
    out = bytearray(b"\x00\x53")
    out.append(code)
    _enc(value, out)
    return bytes(out)


def header_section(durable: bool | None = None, priority: int | None = None,
                   ttl: int | None = None, first_acquirer: bool | None = None,
                   delivery_count: int | None = None) -> bytes:
    """The header section with trailing absent fields left out."""
    fields: list[Any] = [
        durable or None,
        None if priority is None else UByte(priority),
        UInt(ttl) if ttl else None,
        first_acquirer or None,
        UInt(delivery_count) if delivery_count else None,
    ]
    while fields and fields[-1] is None:
        fields.pop()
    return section(0x70, fields)


def list_section(code: int, fields: list[Any]) -> bytes:
    """A list section (properties) with trailing nulls left out."""
    fields = list(fields)
    while fields and fields[-1] is None:
        fields.pop()
    return section(code, fields)


def frame(body: bytes, frame_type: int = 0, channel: int = 0) -> bytes:
    """An AMQP frame: size, data offset 2, type (0 AMQP, 1 SASL), channel, body."""
    return _P32(8 + len(body)) + bytes((2, frame_type)) + _P16(channel) + body


def performative(code: int, fields: list[Any]) -> bytes:
    """A described performative list (trailing nulls left out)."""
    fields = list(fields)
    while fields and fields[-1] is None:
        fields.pop()
    out = bytearray(b"\x00\x53")
    out.append(code)
    _enc(fields, out)
    return bytes(out)
