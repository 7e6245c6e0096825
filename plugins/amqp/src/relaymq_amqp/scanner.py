"""A small AMQP 1.0 decoder and a lazy scanner for encoded messages.

The broker forwards AMQP messages as the bytes it received. It only needs a few
fields to route them (header: durable, priority, ttl; properties: message-id,
to, group-id, ...), so `scan` walks the sections by their size prefixes, decodes
the header and properties lists, and records where the other sections are.
Application properties and annotations are decoded only when somebody asks
(a selector, another protocol), and the body is never decoded: for another
protocol we slice out the payload bytes.

Type codes are those of the AMQP 1.0 type system (OASIS AMQP 1.0 part 1).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Final

from relaymq_amqp.types import (
    Byte,
    Described,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    ULong,
    UShort,
)

_U16: Final = struct.Struct(">H").unpack_from
_I16: Final = struct.Struct(">h").unpack_from
_U32: Final = struct.Struct(">I").unpack_from
_I32: Final = struct.Struct(">i").unpack_from
_U64: Final = struct.Struct(">Q").unpack_from
_I64: Final = struct.Struct(">q").unpack_from
_F32: Final = struct.Struct(">f").unpack_from
_F64: Final = struct.Struct(">d").unpack_from

# Section descriptors (smallulong codes).
HEADER: Final = 0x70
DELIVERY_ANNOTATIONS: Final = 0x71
MESSAGE_ANNOTATIONS: Final = 0x72
PROPERTIES: Final = 0x73
APPLICATION_PROPERTIES: Final = 0x74
DATA: Final = 0x75
AMQP_SEQUENCE: Final = 0x76
AMQP_VALUE: Final = 0x77
FOOTER: Final = 0x78

_SECTION_NAMES: Final = {
    "amqp:header:list": HEADER,
    "amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": MESSAGE_ANNOTATIONS,
    "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APPLICATION_PROPERTIES,
    "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": AMQP_SEQUENCE,
    "amqp:amqp-value:*": AMQP_VALUE,
    "amqp:footer:map": FOOTER,
}

# Width of fixed-size encodings by the constructor's high nibble.
_FIXED: Final = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}


#: Deepest nesting decoded: lists, maps, arrays, described values and their
#: descriptors each add a level. Real frames and messages nest a handful of
#: levels; the bound keeps the recursive decoder far from the stack's end whatever
#: a peer sends (compiled code has no RecursionError to fall back on: a C stack
#: overflow would end the broker). Deeper input is a `DecodeError`, which closes
#: the connection (a frame) or rejects the transfer (a message) with amqp:decode-error.
MAX_DEPTH: Final = 100


class DecodeError(ValueError):
    """Bytes that are not a valid AMQP encoding."""


def _too_deep(pos: int) -> DecodeError:
    return DecodeError(f"AMQP value at offset {pos} is nested more than {MAX_DEPTH} levels deep")


def decode(data: bytes, pos: int = 0) -> tuple[Any, int]:
    """Decode one value at `pos`; return it and the position after it."""
    try:
        return _decode(data, pos, 0)
    except DecodeError:
        raise
    except (IndexError, struct.error, ValueError) as exc:  # ValueError: bad UTF-8, char, uuid
        raise DecodeError(f"truncated or invalid AMQP value at offset {pos}: {exc}") from None


def _compound(data: bytes, pos: int, wide: bool, what: str) -> tuple[int, int, int]:
    """(count, position of the first element, end) of a list/map/array header at
    `pos`, checked against the bytes there: a count or size a peer made up (2^31
    elements in five bytes) fails here, before anything is allocated."""
    if wide:
        size, count = _U32(data, pos)[0], _U32(data, pos + 4)[0]
        pos += 8
        end = pos + size - 4
    else:
        size, count = data[pos], data[pos + 1]
        pos += 2
        end = pos + size - 1
    if end < pos or end > len(data):
        raise DecodeError(f"{what} of {size} bytes at offset {pos} does not fit in its frame")
    if count > end - pos + (what == "array"):  # an element takes a byte at least (in arrays,
        # one constructor byte is shared by all of them)
        raise DecodeError(f"{what} at offset {pos} claims {count} elements in {end - pos} bytes")
    return count, pos, end


def _decode(data: bytes, pos: int, depth: int) -> tuple[Any, int]:  # noqa: C901 - one flat dispatch is fastest
    c = data[pos]
    pos += 1
    if c == 0xA1:  # str8
        end = pos + 1 + data[pos]
        if end > len(data):
            raise DecodeError(f"string at offset {pos} runs past the end")
        return data[pos + 1:end].decode(), end
    if c == 0xA3:  # sym8
        end = pos + 1 + data[pos]
        if end > len(data):
            raise DecodeError(f"symbol at offset {pos} runs past the end")
        return Symbol(data[pos + 1:end].decode("ascii")), end
    if c == 0x40:
        return None, pos
    if c == 0x52:  # smalluint (uint stays a plain int: performatives are full of them)
        return data[pos], pos + 1
    if c == 0x50:  # ubyte
        return UByte(data[pos]), pos + 1
    if c == 0x53:  # smallulong
        return ULong(data[pos]), pos + 1
    if c == 0x43:  # uint0
        return 0, pos
    if c == 0x44:  # ulong0
        return ULong(0), pos
    if c == 0x41:
        return True, pos
    if c == 0x42:
        return False, pos
    if c == 0x56:
        return data[pos] != 0, pos + 1
    if c == 0x54 or c == 0x55 or c == 0x51:  # smallint, smalllong, byte: Java widths kept
        b = data[pos]
        small = b - 256 if b > 127 else b
        return (Int(small) if c == 0x54 else Long(small) if c == 0x55 else Byte(small)), pos + 1
    if c == 0x71:
        return Int(_I32(data, pos)[0]), pos + 4
    if c == 0x70:
        return _U32(data, pos)[0], pos + 4
    if c == 0x81:
        return Long(_I64(data, pos)[0]), pos + 8
    if c == 0x83:  # timestamp
        return Timestamp(_I64(data, pos)[0]), pos + 8
    if c == 0x80:
        return ULong(_U64(data, pos)[0]), pos + 8
    if c == 0xA0:  # vbin8
        end = pos + 1 + data[pos]
        if end > len(data):
            raise DecodeError(f"binary at offset {pos} runs past the end")
        return data[pos + 1:end], end
    if c == 0xB0 or c == 0xB1 or c == 0xB3:
        n = _U32(data, pos)[0]
        end = pos + 4 + n
        if end > len(data):
            raise DecodeError(f"variable-width value at offset {pos} runs past the end")
        raw = data[pos + 4:end]
        if c == 0xB0:
            return raw, end
        return Symbol(raw.decode("ascii")) if c == 0xB3 else raw.decode(), end
    if c == 0x60:
        return UShort(_U16(data, pos)[0]), pos + 2
    if c == 0x61:
        return Short(_I16(data, pos)[0]), pos + 2
    if c == 0x82:
        return _F64(data, pos)[0], pos + 8
    if c == 0x72:
        return Float(_F32(data, pos)[0]), pos + 4
    if c == 0x98:
        return uuid.UUID(bytes=bytes(data[pos:pos + 16])), pos + 16
    if c == 0x73:  # char: UTF-32
        return chr(_U32(data, pos)[0]), pos + 4
    if c == 0x74 or c == 0x84 or c == 0x94:  # decimals stay raw
        n = 4 if c == 0x74 else 8 if c == 0x84 else 16
        return bytes(data[pos:pos + n]), pos + n
    if c == 0x45:
        return [], pos
    if c == 0xC0 or c == 0xD0:
        if depth >= MAX_DEPTH:
            raise _too_deep(pos - 1)
        count, pos, end = _compound(data, pos, c == 0xD0, "list")
        out = []
        for _ in range(count):
            v, pos = _decode(data, pos, depth + 1)
            out.append(v)
        if pos != end:
            raise DecodeError("list size does not match its elements")
        return out, pos
    if c == 0xC1 or c == 0xD1:
        if depth >= MAX_DEPTH:
            raise _too_deep(pos - 1)
        count, pos, end = _compound(data, pos, c == 0xD1, "map")
        if count % 2:
            raise DecodeError("a map needs an even number of elements")
        m: dict[Any, Any] = {}
        for _ in range(count // 2):
            k, pos = _decode(data, pos, depth + 1)
            v, pos = _decode(data, pos, depth + 1)
            if isinstance(k, (list, dict)):
                k = repr(k)
            m[k] = v
        if pos != end:
            raise DecodeError("map size does not match its elements")
        return m, pos
    if c == 0x00:
        if depth >= MAX_DEPTH:
            raise _too_deep(pos - 1)
        descriptor, pos = _decode(data, pos, depth + 1)
        value, pos = _decode(data, pos, depth + 1)
        return Described(descriptor, value), pos
    if c == 0xE0 or c == 0xF0:
        if depth >= MAX_DEPTH:
            raise _too_deep(pos - 1)
        return _decode_array(data, pos, c == 0xF0, depth + 1)
    raise DecodeError(f"unknown AMQP type code 0x{c:02x} at offset {pos - 1}")


def _decode_array(data: bytes, pos: int, wide: bool, depth: int) -> tuple[list[Any], int]:
    count, pos, end = _compound(data, pos, wide, "array")
    descriptor = None
    if data[pos] == 0x00:
        descriptor, pos = _decode(data, pos + 1, depth)
    code = data[pos]
    pos += 1
    out: list[Any] = []
    for _ in range(count):
        # Elements share one constructor and are encoded without it.
        v, pos = _decode_element(data, pos, code, depth)
        out.append(Described(descriptor, v) if descriptor is not None else v)
    if pos != end:
        raise DecodeError("array size does not match its elements")
    return out, pos


def _decode_element(data: bytes, pos: int, code: int, depth: int) -> tuple[Any, int]:
    hi = code >> 4
    if hi in _FIXED:
        n = _FIXED[hi]
    elif hi == 0xA or hi == 0xC or hi == 0xE:
        n = 1 + data[pos]
    elif hi == 0xB or hi == 0xD or hi == 0xF:
        n = 4 + _U32(data, pos)[0]
    else:
        raise DecodeError(f"unknown array element type 0x{code:02x}")
    if pos + n > len(data):
        raise DecodeError(f"array element at offset {pos} runs past the end")
    return _decode(bytes([code]) + bytes(data[pos:pos + n]), 0, depth)[0], pos + n


def skip(data: bytes, pos: int) -> int:
    """The position after the value at `pos`, without decoding it.

    A loop, not a recursion: a described value is two values (descriptor and
    value), so each 0x00 adds one to the values still to skip; compound values
    are skipped by their size. At most `MAX_DEPTH` described constructors."""
    values = 1
    described = 0
    start = pos
    while values:
        c = data[pos]
        if c == 0x00:
            described += 1
            if described > MAX_DEPTH:
                raise _too_deep(start)
            values += 1
            pos += 1
            continue
        hi = c >> 4
        if hi in _FIXED:
            pos += 1 + _FIXED[hi]
        elif hi == 0xA or hi == 0xC or hi == 0xE:
            pos += 2 + data[pos + 1]
        elif hi == 0xB or hi == 0xD or hi == 0xF:
            pos += 5 + _U32(data, pos + 1)[0]
        else:
            raise DecodeError(f"unknown AMQP type code 0x{c:02x} at offset {pos}")
        values -= 1
    return pos


def _kinds() -> bytes:
    """For each constructor byte: 1 + the width of a fixed-width type (null,
    booleans, numbers, timestamp, uuid, char), a variable or compound kind
    below, or 0 for a byte that is no AMQP type."""
    table = bytearray(256)
    for c in (0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x60,
              0x61, 0x70, 0x71, 0x72, 0x73, 0x74, 0x80, 0x81, 0x82, 0x83, 0x84, 0x94, 0x98):
        table[c] = 1 + _FIXED[c >> 4]
    for c in (0xA0, 0xA1, 0xA3):
        table[c] = _VAR8
    for c in (0xB0, 0xB1, 0xB3):
        table[c] = _VAR32
    for c in (0xC0, 0xC1, 0xD0, 0xD1):
        table[c] = _COMPOUND
    table[0xE0] = table[0xF0] = _ARRAY
    table[0x00] = _DESCRIBED
    return bytes(table)


_VAR8: Final = 20
_VAR32: Final = 21
_COMPOUND: Final = 22
_ARRAY: Final = 23
_DESCRIBED: Final = 24
_KINDS: Final = _kinds()


def check(data: bytes, pos: int, end: int) -> None:
    """Check the values from `pos` to `end` as a consumer will decode them,
    without building them: every type code known, every size inside its value,
    strings UTF-8 and symbols ASCII, nesting at most `MAX_DEPTH` deep. The broker
    keeps a message's sections as it received them and decodes most of them
    never; a value that would fail a consumer's decoder (a string cut inside a
    character, a list nested 20,000 deep) is refused when the message arrives,
    not found by every consumer it is delivered to."""
    try:
        while pos < end:
            pos = _check(data, pos, 0)
    except DecodeError:
        raise
    except (IndexError, struct.error, ValueError) as exc:  # ValueError: bad UTF-8
        raise DecodeError(f"invalid AMQP value at offset {pos}: {exc}") from None
    if pos != end:
        raise DecodeError(f"a value runs past its section's end at offset {end}")


def _check(data: bytes, pos: int, depth: int) -> int:
    c = data[pos]
    k = _KINDS[c]
    if k == 0:
        raise DecodeError(f"unknown AMQP type code 0x{c:02x} at offset {pos}")
    if k < _VAR8:
        end = pos + k
        if c == 0x73 and _U32(data, pos + 1)[0] > 0x10FFFF:
            raise DecodeError(f"char at offset {pos} is not a Unicode code point")
    elif k == _VAR8:
        end = pos + 2 + data[pos + 1]
        if c == 0xA1:
            data[pos + 2:end].decode()
        elif c == 0xA3:
            data[pos + 2:end].decode("ascii")
    elif k == _VAR32:
        end = pos + 5 + _U32(data, pos + 1)[0]
        if c == 0xB1:
            data[pos + 5:end].decode()
        elif c == 0xB3:
            data[pos + 5:end].decode("ascii")
    elif depth >= MAX_DEPTH:
        raise _too_deep(pos)
    elif k == _DESCRIBED:
        return _check(data, _check(data, pos + 1, depth + 1), depth + 1)
    elif k == _COMPOUND:
        count, at, end = _compound(data, pos + 1, c >= 0xD0, "map" if c & 1 else "list")
        if c & 1 and count % 2:
            raise DecodeError(f"a map at offset {pos} has an odd number of elements")
        for _ in range(count):
            at = _check(data, at, depth + 1)
        if at != end:
            raise DecodeError(f"a list or map at offset {pos} does not match its size")
    else:
        end = _check_array(data, pos + 1, c == 0xF0, depth + 1)
    if end > len(data):
        raise DecodeError(f"a value at offset {pos} runs past the end")
    return end


def _check_array(data: bytes, pos: int, wide: bool, depth: int) -> int:
    count, pos, end = _compound(data, pos, wide, "array")
    if data[pos] == 0x00:
        pos = _check(data, pos + 1, depth)
    code = data[pos]
    pos += 1
    k = _KINDS[code]
    if k == 0 or k == _DESCRIBED:
        raise DecodeError(f"unknown array element type 0x{code:02x}")
    if k < _VAR8 and code != 0x73:
        pos += count * (k - 1)  # fixed-width elements: only their room to check
    else:
        one = bytes((code,))
        hi = code >> 4
        small = hi == 0xA or hi == 0xC or hi == 0xE  # a one-byte size
        for _ in range(count):
            # Elements share the constructor and are encoded without it.
            if k < _VAR8:
                n = k - 1
            elif small:
                n = 1 + data[pos]
            else:
                n = 4 + _U32(data, pos)[0]
            if pos + n > end:
                raise DecodeError(f"array element at offset {pos} runs past the end")
            _check(one + data[pos:pos + n], 0, depth)
            pos += n
    if pos != end:
        raise DecodeError("array size does not match its elements")
    return end


# ---------------------------------------------------------------------------
# Message sections
# ---------------------------------------------------------------------------


class Sections:
    """Where each section of an encoded message is, with header and properties decoded.

    `header` and `properties` are the decoded lists (None when absent); the
    other sections are (start, end) spans into the bytes, decoded on demand.
    The defaults are class attributes, so a scan sets only what it found.
    """

    header: list[Any] | None = None
    header_span: tuple[int, int] | None = None
    delivery_annotations: tuple[int, int] | None = None
    message_annotations: tuple[int, int] | None = None
    properties: list[Any] | None = None
    application_properties: tuple[int, int] | None = None
    body_start = 0
    body_end = 0
    footer: tuple[int, int] | None = None
    #: for the usual body, one data binary or amqp-value string: where its bytes start
    payload_start = 0
    payload_kind: str | None = None


def _section_code(data: bytes, pos: int) -> tuple[int, int]:
    """The section descriptor at `pos` (after the 0x00) and where its value starts."""
    c = data[pos]
    if c == 0x53:
        return data[pos + 1], pos + 2
    if c == 0x80:
        v = _U64(data, pos + 1)[0]
        return (v if v <= 0xFF else -1), pos + 9
    if c == 0xA3 or c == 0xB3:
        name, after = _decode(data, pos, 0)
        return _SECTION_NAMES.get(name, -1), after
    raise DecodeError(f"bad section descriptor at offset {pos}")


_EMPTY_HEADER: Final = b"\x00\x53\x70\x45"
_EMPTY_PROPERTIES: Final = b"\x00\x53\x73\x45"


#: a header whose only field is durable=true (what clients write for a persistent message)
_DURABLE_HEADER: Final = b"\x00\x53\x70\xc0\x02\x01\x41"


def plain_body(data: bytes) -> tuple[str, bytes, bool] | None:
    """(kind, payload, durable) for a message that is only a body -- one data
    binary or an amqp-value binary/string, after at most a header that is empty
    or says only durable, and empty properties (what proton writes for a bare
    message) -- else None."""
    pos = 0
    durable = False
    if data.startswith(_EMPTY_HEADER):
        pos = 4
    elif data.startswith(_DURABLE_HEADER):
        pos = 7
        durable = True
    if data.startswith(_EMPTY_PROPERTIES, pos):
        pos += 4
    if len(data) < pos + 5 or data[pos] != 0 or data[pos + 1] != 0x53:
        return None
    code = data[pos + 2]
    c = data[pos + 3]
    if c == 0xB0 or c == 0xB1:
        start = pos + 8
        if len(data) < start:
            return None
        end = start + _U32(data, pos + 4)[0]
    elif c == 0xA0 or c == 0xA1:
        start = pos + 5
        end = start + data[pos + 4]
    else:
        return None
    if end != len(data):
        return None
    binary = c == 0xB0 or c == 0xA0
    if code == DATA and binary:
        return "data", data[start:], durable
    if code == AMQP_VALUE:
        return ("binary" if binary else "string"), data[start:], durable
    return None


def scan(data: bytes) -> Sections:
    """Locate the sections of an encoded AMQP message (header/properties decoded)."""
    try:
        return _scan(data)
    except DecodeError:
        raise
    except (IndexError, struct.error, ValueError) as exc:  # ValueError: bad UTF-8, char, uuid
        raise DecodeError(f"malformed AMQP message: {exc}") from None


def _scan(data: bytes) -> Sections:
    s = Sections()
    pos = 0
    n = len(data)
    while pos < n:
        if data[pos] != 0:
            raise DecodeError(f"expected a described section at offset {pos}")
        start = pos
        if data[pos + 1] == 0x53:
            code = data[pos + 2]
            pos += 3
        else:
            code, pos = _section_code(data, pos + 1)
        if code == DATA or code == AMQP_VALUE:
            # The usual body: one binary or string that ends the message.
            c = data[pos]
            if c == 0xB0 or c == 0xB1:
                payload = pos + 5
                end = payload + _U32(data, pos + 1)[0]
            elif c == 0xA0 or c == 0xA1:
                payload = pos + 2
                end = payload + data[pos + 1]
            else:
                end = -1
            if end == n:
                s.body_start = start
                s.body_end = n
                s.payload_start = payload
                s.payload_kind = ("data" if code == DATA else "binary") if c == 0xB0 or c == 0xA0 \
                    else ("string" if code == AMQP_VALUE else None)
                return s
        if code == HEADER:
            if data[pos] == 0x45:  # an empty list (proton writes one): nothing to decode
                pos += 1
            else:
                header, pos = _decode(data, pos, 0)
                if header is not None and not isinstance(header, list):
                    raise DecodeError("the header section must be a list")
                s.header = header
            s.header_span = (start, pos)
        elif code == PROPERTIES:
            if data[pos] == 0x45:
                pos += 1
            else:
                properties, pos = _decode(data, pos, 0)
                if properties is not None and not isinstance(properties, list):
                    raise DecodeError("the properties section must be a list")
                s.properties = properties
        elif code == DATA or code == AMQP_VALUE or code == AMQP_SEQUENCE:
            s.body_start = start
            pos = skip(data, pos)
            while pos < n:  # more body sections (data*, amqp-sequence*) until the footer
                code2, vpos = _section_code(data, pos + 1)
                if code2 == FOOTER:
                    break
                pos = skip(data, vpos)
            s.body_end = pos
            if pos < n:
                _, vpos = _section_code(data, pos + 1)
                s.footer = (pos, skip(data, vpos))
                pos = s.footer[1]
            if pos != n:
                raise DecodeError("bytes after the footer")
            break
        else:
            end = skip(data, pos)
            if code == MESSAGE_ANNOTATIONS:
                s.message_annotations = (pos, end)
            elif code == APPLICATION_PROPERTIES:
                s.application_properties = (pos, end)
            elif code == DELIVERY_ANNOTATIONS:
                s.delivery_annotations = (pos, end)
            elif code == FOOTER:
                s.footer = (pos, end)
            else:
                raise DecodeError(f"unknown message section 0x{code:x}")
            pos = end
        if pos > n:
            raise DecodeError("a section runs past the end of the message")
    if not s.body_start:
        s.body_start = s.body_end = pos
    return s


def check_sections(data: bytes, s: Sections) -> None:
    """`check` the sections `scan` left encoded: annotations, application
    properties, footer and the body (a string body's UTF-8 included)."""
    for span in (s.delivery_annotations, s.message_annotations, s.application_properties, s.footer):
        if span is not None:
            check(data, span[0], span[1])
    if s.payload_kind == "string":
        check_text(data[s.payload_start:s.body_end])
    elif s.payload_kind is None and s.body_start != s.body_end:
        check(data, s.body_start, s.body_end)


def check_text(payload: bytes) -> None:
    """A string body must be UTF-8, as every consumer's decoder expects."""
    try:
        payload.decode()
    except UnicodeDecodeError as exc:
        raise DecodeError(f"the string body is not UTF-8: {exc.reason} at byte {exc.start}") from None


def decode_map_at(data: bytes, span: tuple[int, int] | None) -> dict[Any, Any]:
    """Decode the map value of a section span (annotations, application properties)."""
    if span is None:
        return {}
    value, _ = decode(data, span[0])
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DecodeError("expected a map section")
    return value


def application_properties(data: bytes) -> dict[str, Any]:
    """The application-properties of an encoded message (the lazy loader's work)."""
    return decode_map_at(data, scan(data).application_properties)


def body_value(data: bytes, s: Sections) -> tuple[str, bytes]:
    """The body as (kind, bytes) without interpreting it: ``("data", payload)``,
    ``("string", utf8)``, ``("binary", payload)``, ``("null", b"")``, or
    ``("value"|"sequence", raw encoded sections)``."""
    kind = s.payload_kind
    if kind is not None:
        return kind, data[s.payload_start:s.body_end]
    start, end = s.body_start, s.body_end
    if start == end:
        return "null", b""
    code, pos = _section_code(data, start + 1)
    if code == DATA:
        after = skip(data, pos)
        if after == end:
            return "data", _binary_payload(data, pos)
        parts = []
        while pos < end:  # several data sections: concatenate their payloads
            parts.append(_binary_payload(data, pos))
            pos = skip(data, pos)
            if pos < end:
                _, pos = _section_code(data, pos + 1)
        return "data", b"".join(parts)
    if code == AMQP_VALUE:
        c = data[pos]
        if c == 0xA1:
            return "string", data[pos + 2:end]
        if c == 0xB1:
            return "string", data[pos + 5:end]
        if c == 0xA0 or c == 0xB0:
            return "binary", _binary_payload(data, pos)
        if c == 0x40:
            return "null", b""
        return "value", data[pos:end]
    return "sequence", data[start:end]


def _binary_payload(data: bytes, pos: int) -> bytes:
    c = data[pos]
    if c == 0xA0:
        return data[pos + 2:pos + 2 + data[pos + 1]]
    if c == 0xB0:
        n = _U32(data, pos + 1)[0]
        return data[pos + 5:pos + 5 + n]
    if c == 0x40:
        return b""
    raise DecodeError(f"expected binary, found type 0x{c:02x}")
