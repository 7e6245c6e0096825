"""AMQP 1.0 wire codec, written for a load generator rather than a general client.

Why hand-written instead of proton: proton's Python binding spends tens of
microseconds per message, which would make the bench measure the client.  Here
the control frames (open, attach, flow, ...) are built by small composable
encoders that run once per connection, and the hot path works on pre-encoded
transfer frames (:class:`TransferTemplate`) in which only the delivery-id/tag
and the body's sequence/timestamp bytes change.  Incoming transfers are parsed
with :func:`parse_transfer`, which reads only the fields the bench needs.

Every encoder returns ``bytes`` of one complete AMQP value, so composites are
built bottom-up: ``composite(ATTACH, [string(name), uint(0), ...])``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

# --- protocol headers and frame types ---------------------------------------
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
FRAME_AMQP = 0
FRAME_SASL = 1
EMPTY_FRAME = b"\x00\x00\x00\x08\x02\x00\x00\x00"  # heartbeat: header only

# --- descriptor codes (small-ulong) -----------------------------------------
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
ERROR = 0x1D
RECEIVED, ACCEPTED, REJECTED, RELEASED, MODIFIED = range(0x23, 0x28)
SOURCE, TARGET = 0x28, 0x29
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)
HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES = 0x70, 0x71, 0x72, 0x73
APPLICATION_PROPERTIES, DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78

PERFORMATIVE_NAMES = {
    OPEN: "open", BEGIN: "begin", ATTACH: "attach", FLOW: "flow", TRANSFER: "transfer",
    DISPOSITION: "disposition", DETACH: "detach", END: "end", CLOSE: "close",
    SASL_MECHANISMS: "sasl-mechanisms", SASL_INIT: "sasl-init", SASL_OUTCOME: "sasl-outcome",
}

_U32 = struct.Struct(">I")
_FRAME_HEADER = struct.Struct(">IBBH")


class Symbol(str):
    """A decoded AMQP symbol (kept distinct from string so tests can tell them apart)."""


class Described(NamedTuple):
    """A decoded described value: ``descriptor`` is an int code or a Symbol."""

    descriptor: Any
    value: Any


class AmqpDecodeError(ValueError):
    """Raised when bytes are not valid AMQP 1.0 encoding."""


# --- primitive encoders ------------------------------------------------------
def null() -> bytes:
    return b"\x40"


def boolean(v: bool) -> bytes:
    return b"\x41" if v else b"\x42"


def ubyte(v: int) -> bytes:
    return bytes((0x50, v))


def ushort(v: int) -> bytes:
    return b"\x60" + struct.pack(">H", v)


def uint(v: int) -> bytes:
    if v == 0:
        return b"\x43"
    if v < 256:
        return bytes((0x52, v))
    return b"\x70" + _U32.pack(v)


def uint_fixed(v: int) -> bytes:
    """uint always in its 4-byte form, so it can be patched in place later."""
    return b"\x70" + _U32.pack(v)


def ulong(v: int) -> bytes:
    if v == 0:
        return b"\x44"
    if v < 256:
        return bytes((0x53, v))
    return b"\x80" + struct.pack(">Q", v)


def long(v: int) -> bytes:
    if -128 <= v <= 127:
        return b"\x55" + struct.pack(">b", v)
    return b"\x81" + struct.pack(">q", v)


def timestamp(ms: int) -> bytes:
    return b"\x83" + struct.pack(">q", ms)


def _variable(small: int, large: int, data: bytes) -> bytes:
    if len(data) < 256:
        return bytes((small, len(data))) + data
    return bytes((large,)) + _U32.pack(len(data)) + data


def binary(b: bytes) -> bytes:
    return _variable(0xA0, 0xB0, bytes(b))


def string(s: str) -> bytes:
    return _variable(0xA1, 0xB1, s.encode())


def symbol(s: str) -> bytes:
    return _variable(0xA3, 0xB3, s.encode("ascii"))


def list_(items: Sequence[bytes]) -> bytes:
    """Encode a list of already-encoded values; trailing nulls are dropped (spec 2.7)."""
    items = list(items)
    while items and items[-1] == b"\x40":
        items.pop()
    if not items:
        return b"\x45"
    body = b"".join(items)
    if len(body) + 1 < 256 and len(items) < 256:
        return bytes((0xC0, len(body) + 1, len(items))) + body
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(items)) + body


def map_(pairs: Iterable[tuple[bytes, bytes]]) -> bytes:
    flat = [x for kv in pairs for x in kv]
    body = b"".join(flat)
    if len(body) + 1 < 256 and len(flat) < 256:
        return bytes((0xC1, len(body) + 1, len(flat))) + body
    return b"\xd1" + struct.pack(">II", len(body) + 4, len(flat)) + body


def symbol_array(symbols: Sequence[str]) -> bytes:
    """An array of symbols (capabilities), or a single symbol when there is one."""
    if len(symbols) == 1:
        return symbol(symbols[0])
    encoded = [s.encode("ascii") for s in symbols]
    body = b"\xb3" + b"".join(_U32.pack(len(e)) + e for e in encoded)
    return b"\xf0" + struct.pack(">II", len(body) + 4, len(encoded)) + body


def described(code: int, value: bytes) -> bytes:
    return b"\x00" + ulong(code) + value


def composite(code: int, fields: Sequence[bytes]) -> bytes:
    return described(code, list_(fields))


def opt(value: Any, enc: Any) -> bytes:
    """``enc(value)`` or null when value is None; keeps performative builders short."""
    return null() if value is None else enc(value)


# --- frames ------------------------------------------------------------------
def frame(body: bytes, channel: int = 0, frame_type: int = FRAME_AMQP) -> bytes:
    return _FRAME_HEADER.pack(8 + len(body), 2, frame_type, channel) + body


def open_frame(
    container_id: str,
    hostname: str | None = None,
    max_frame_size: int = 1 << 20,
    channel_max: int = 0,
    idle_timeout_ms: int | None = None,
) -> bytes:
    return frame(composite(OPEN, [
        string(container_id), opt(hostname, string), uint(max_frame_size),
        ushort(channel_max), opt(idle_timeout_ms, uint),
    ]))


def begin_frame(next_outgoing_id: int = 0, incoming_window: int = 0x7FFFFFFF,
                outgoing_window: int = 0x7FFFFFFF, channel: int = 0) -> bytes:
    return frame(composite(BEGIN, [
        null(), uint(next_outgoing_id), uint(incoming_window), uint(outgoing_window),
    ]), channel)


def terminus(code: int, address: str | None, durable: int = 0,
             capabilities: Sequence[str] = (), expiry_policy: str | None = None) -> bytes:
    """A source (0x28) or target (0x29); capabilities sit at index 10 / 6 respectively."""
    fields = [opt(address, string), uint(durable), opt(expiry_policy, symbol)]
    caps = symbol_array(capabilities) if capabilities else null()
    if code == SOURCE:
        fields += [null()] * 7 + [caps]
    else:
        fields += [null()] * 3 + [caps]
    return composite(code, fields)


def attach_frame(name: str, handle: int, receiver: bool, source: bytes, target: bytes,
                 snd_settle_mode: int = 0, rcv_settle_mode: int = 0, channel: int = 0) -> bytes:
    return frame(composite(ATTACH, [
        string(name), uint(handle), boolean(receiver), ubyte(snd_settle_mode),
        ubyte(rcv_settle_mode), source, target, null(), null(),
        null() if receiver else uint(0),  # initial-delivery-count: senders only
    ]), channel)


def flow_frame(next_incoming_id: int | None, incoming_window: int, next_outgoing_id: int,
               outgoing_window: int, handle: int | None = None, delivery_count: int | None = None,
               link_credit: int | None = None, drain: bool = False, channel: int = 0) -> bytes:
    return frame(composite(FLOW, [
        opt(next_incoming_id, uint), uint(incoming_window), uint(next_outgoing_id),
        uint(outgoing_window), opt(handle, uint), opt(delivery_count, uint),
        opt(link_credit, uint), null(), boolean(drain) if drain else null(),
    ]), channel)


ACCEPTED_STATE = composite(ACCEPTED, [])


def disposition_frame(first: int, last: int, receiver: bool = True, settled: bool = True,
                      state: bytes = ACCEPTED_STATE, channel: int = 0) -> bytes:
    return frame(composite(DISPOSITION, [
        boolean(receiver), uint(first), uint(last), boolean(settled), state,
    ]), channel)


def detach_frame(handle: int, closed: bool = True, channel: int = 0) -> bytes:
    return frame(composite(DETACH, [uint(handle), boolean(closed)]), channel)


def end_frame(channel: int = 0) -> bytes:
    return frame(composite(END, []), channel)


def close_frame() -> bytes:
    return frame(composite(CLOSE, []))


def sasl_init_frame(mechanism: str, initial_response: bytes | None, hostname: str | None) -> bytes:
    return frame(composite(SASL_INIT, [
        symbol(mechanism), opt(initial_response, binary), opt(hostname, string),
    ]), frame_type=FRAME_SASL)


def sasl_plain_response(user: str, password: str) -> bytes:
    return b"\x00" + user.encode() + b"\x00" + password.encode()


# --- decoder -----------------------------------------------------------------
_FIXED = {
    0x40: (0, lambda b, p: None), 0x41: (0, lambda b, p: True), 0x42: (0, lambda b, p: False),
    0x43: (0, lambda b, p: 0), 0x44: (0, lambda b, p: 0),
    0x50: (1, lambda b, p: b[p]), 0x51: (1, lambda b, p: struct.unpack_from(">b", b, p)[0]),
    0x52: (1, lambda b, p: b[p]), 0x53: (1, lambda b, p: b[p]),
    0x54: (1, lambda b, p: struct.unpack_from(">b", b, p)[0]),
    0x55: (1, lambda b, p: struct.unpack_from(">b", b, p)[0]),
    0x56: (1, lambda b, p: b[p] != 0),
    0x60: (2, lambda b, p: struct.unpack_from(">H", b, p)[0]),
    0x61: (2, lambda b, p: struct.unpack_from(">h", b, p)[0]),
    0x70: (4, lambda b, p: struct.unpack_from(">I", b, p)[0]),
    0x71: (4, lambda b, p: struct.unpack_from(">i", b, p)[0]),
    0x72: (4, lambda b, p: struct.unpack_from(">f", b, p)[0]),
    0x73: (4, lambda b, p: struct.unpack_from(">I", b, p)[0]),  # char as code point
    0x80: (8, lambda b, p: struct.unpack_from(">Q", b, p)[0]),
    0x81: (8, lambda b, p: struct.unpack_from(">q", b, p)[0]),
    0x82: (8, lambda b, p: struct.unpack_from(">d", b, p)[0]),
    0x83: (8, lambda b, p: struct.unpack_from(">q", b, p)[0]),  # timestamp ms
    0x98: (16, lambda b, p: bytes(b[p:p + 16])),  # uuid
}


def decode(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[Any, int]:
    """Decode one AMQP value at ``pos``; returns ``(value, next_pos)``.

    Used for control frames and in tests; the transfer hot path does not call it.
    """
    try:
        c = buf[pos]
    except IndexError:
        raise AmqpDecodeError(f"truncated value at {pos}") from None
    pos += 1
    if c == 0x00:
        descriptor, pos = decode(buf, pos)
        value, pos = decode(buf, pos)
        return Described(descriptor, value), pos
    fixed = _FIXED.get(c)
    if fixed is not None:
        width, read = fixed
        if pos + width > len(buf):
            raise AmqpDecodeError(f"truncated 0x{c:02x} at {pos}")
        return read(buf, pos), pos + width
    if c in (0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3):
        if c & 0x10:
            (n,) = _U32.unpack_from(buf, pos)
            pos += 4
        else:
            n = buf[pos]
            pos += 1
        if pos + n > len(buf):
            raise AmqpDecodeError(f"truncated 0x{c:02x} payload at {pos}")
        raw = bytes(buf[pos:pos + n])
        pos += n
        if c in (0xA0, 0xB0):
            return raw, pos
        if c in (0xA1, 0xB1):
            return raw.decode(), pos
        return Symbol(raw.decode("ascii")), pos
    if c == 0x45:
        return [], pos
    if c in (0xC0, 0xC1, 0xD0, 0xD1):
        if c & 0x10:
            size, count = struct.unpack_from(">II", buf, pos)
            pos += 8
            end = pos + size - 4
        else:
            size, count = buf[pos], buf[pos + 1]
            pos += 2
            end = pos + size - 1
        items = []
        for _ in range(count):
            v, pos = decode(buf, pos)
            items.append(v)
        if pos != end:
            raise AmqpDecodeError(f"compound size mismatch at {pos} (expected end {end})")
        if c in (0xC1, 0xD1):
            return dict(zip(items[::2], items[1::2], strict=True)), pos
        return items, pos
    if c in (0xE0, 0xF0):
        if c == 0xF0:
            size, count = struct.unpack_from(">II", buf, pos)
            pos += 8
        else:
            size, count = buf[pos], buf[pos + 1]
            pos += 2
        elem_ctor = buf[pos]
        out = []
        # Re-use the scalar decoder by presenting each element with its constructor.
        p = pos + 1
        for _ in range(count):
            if elem_ctor in (0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3):
                width = 4 if elem_ctor & 0x10 else 1
                n = _U32.unpack_from(buf, p)[0] if width == 4 else buf[p]
                chunk = bytes((elem_ctor,)) + bytes(buf[p:p + width + n])
                p += width + n
            else:
                width = _FIXED[elem_ctor][0]
                chunk = bytes((elem_ctor,)) + bytes(buf[p:p + width])
                p += width
            v, _ = decode(chunk, 0)
            out.append(v)
        return out, p
    raise AmqpDecodeError(f"unsupported constructor 0x{c:02x} at {pos - 1}")


class Frame(NamedTuple):
    """One frame split out of a byte stream (body is the performative + payload)."""

    frame_type: int
    channel: int
    body: bytes


def split_frames(data: bytes) -> tuple[list[Frame], int]:
    """Split complete frames off ``data``; returns the frames and bytes consumed."""
    frames = []
    pos = 0
    n = len(data)
    while n - pos >= 8:
        size, doff, ftype, channel = _FRAME_HEADER.unpack_from(data, pos)
        if size < 8 or doff < 2:
            raise AmqpDecodeError(f"bad frame header size={size} doff={doff}")
        if n - pos < size:
            break
        frames.append(Frame(ftype, channel, data[pos + doff * 4:pos + size]))
        pos += size
    return frames, pos


def decode_performative(body: bytes) -> tuple[int, list[Any], int]:
    """Decode a frame body's performative: ``(code, fields, payload_offset)``."""
    value, pos = decode(body, 0)
    if not isinstance(value, Described) or not isinstance(value.descriptor, int):
        raise AmqpDecodeError("frame body is not a described performative")
    fields = value.value if isinstance(value.value, list) else []
    return value.descriptor, fields, pos


def field(fields: Sequence[Any], index: int, default: Any = None) -> Any:
    """Field ``index`` of a decoded composite, or ``default`` when omitted/null."""
    if index < len(fields) and fields[index] is not None:
        return fields[index]
    return default


def describe_error(err: Any) -> str:
    """Human-readable text for an AMQP error composite (condition: description)."""
    if isinstance(err, Described) and isinstance(err.value, list):
        cond = field(err.value, 0, "?")
        desc = field(err.value, 1, "")
        return f"{cond}: {desc}" if desc else str(cond)
    return repr(err)


# --- hot path: incoming transfers -------------------------------------------
_UNPACK_U32 = _U32.unpack_from


def _skip_uint(b: bytes | bytearray, p: int) -> int:
    c = b[p]
    return p + (2 if c in (0x52, 0x53, 0x50) else 5 if c in (0x70, 0x60) else 1)


def parse_transfer(b: bytes | bytearray, p: int, end: int) -> tuple[int | None, bool, bool, int]:
    """Read a transfer performative starting at ``p`` (the 0x00 descriptor byte).

    Returns ``(delivery_id, settled, more, payload_start)``.  Only delivery-id,
    settled and more are decoded; the list size tells where the payload begins.
    ``delivery_id`` is None on continuation frames of a multi-frame message.
    """
    # b[p:p+3] == 00 53 14 was checked by the caller
    c = b[p + 3]
    if c == 0xC0:
        list_end = p + 5 + b[p + 4]
        q = p + 6
        count = b[p + 5]
    elif c == 0xD0:
        list_end = p + 8 + _UNPACK_U32(b, p + 4)[0]
        count = _UNPACK_U32(b, p + 8)[0]
        q = p + 12
    else:
        raise AmqpDecodeError("transfer without fields")
    if list_end > end:
        raise AmqpDecodeError("transfer performative overruns frame")
    q = _skip_uint(b, q)  # handle
    delivery_id: int | None = None
    settled = more = False
    if count > 1:
        c = b[q]
        if c == 0x70:
            delivery_id = _UNPACK_U32(b, q + 1)[0]
            q += 5
        elif c == 0x52:
            delivery_id = b[q + 1]
            q += 2
        elif c == 0x43:
            delivery_id = 0
            q += 1
        else:  # null
            q += 1
        if count > 2:  # delivery-tag
            c = b[q]
            q += 2 + b[q + 1] if c == 0xA0 else (5 + _UNPACK_U32(b, q + 1)[0] if c == 0xB0 else 1)
            if count > 3:
                q = _skip_uint(b, q)  # message-format
                if count > 4:
                    c = b[q]
                    if c == 0x56:
                        settled = b[q + 1] != 0
                        q += 2
                    else:
                        settled = c == 0x41
                        q += 1
                    if count > 5:
                        c = b[q]
                        more = c == 0x41 or (c == 0x56 and b[q + 1] != 0)
    return delivery_id, settled, more, list_end


# --- hot path: outgoing transfers --------------------------------------------
class TransferTemplate:
    """Pre-encoded transfer frame(s) for one message; patch with :meth:`pack_into`.

    The performative encodes delivery-id as a fixed 4-byte uint and the
    delivery-tag as 4 binary bytes (the same number), so both sit at fixed
    offsets.  ``body`` must start with the bench's payload prefix; the
    sequence and timestamp are at ``seq_offset`` inside ``body``.  One
    ``struct.pack_into`` per message writes delivery-id, tag, seq and timestamp
    in one go (the constant bytes between them are part of the struct).

    If the encoded message does not fit ``max_frame_size`` it is split into
    several frames (``more`` = true on all but the last); ``frames_per_message``
    tells the session how many transfer-ids each message consumes.
    """

    def __init__(self, handle: int, body: bytes, seq_offset: int, durable: bool,
                 max_frame_size: int = 1 << 20, settled: bool = False, channel: int = 0):
        sections = b""
        if durable:
            sections += described(HEADER, list_([boolean(True)]))
        data_section_head = described(DATA, b"")
        if len(body) < 256:
            data_section_head += bytes((0xA0, len(body)))
        else:
            data_section_head += b"\xb0" + _U32.pack(len(body))
        sections += data_section_head
        body_offset_in_sections = len(sections)
        sections += body

        def perf(first: bool, more: bool) -> bytes:
            if first:
                fields = [uint_fixed(handle), uint_fixed(0), b"\xa0\x04\x00\x00\x00\x00",
                          uint(0), boolean(settled), boolean(more)]
            else:
                fields = [uint_fixed(handle), null(), null(), null(), boolean(settled),
                          boolean(more)]
            items = b"".join(fields)
            return b"\x00\x53\x14" + bytes((0xC0, len(items) + 1, len(fields))) + items

        first_perf_len = len(perf(True, False))
        if 8 + first_perf_len + len(sections) <= max_frame_size:
            chunks = [sections]
        else:
            room_first = max_frame_size - 8 - first_perf_len
            room_next = max_frame_size - 8 - len(perf(False, False))
            if room_first < body_offset_in_sections + seq_offset + 16 or room_next < 1:
                raise ValueError(f"max-frame-size {max_frame_size} too small for a transfer")
            chunks = [sections[:room_first]]
            rest = sections[room_first:]
            while rest:
                chunks.append(rest[:room_next])
                rest = rest[room_next:]
        out = bytearray()
        for i, chunk in enumerate(chunks):
            more = i < len(chunks) - 1
            out += frame(perf(i == 0, more) + chunk, channel)
        self.frames_per_message = len(chunks)
        self.data = bytes(out)
        # offsets inside self.data: frame header 8, then 00 53 14 c0 size count,
        # then 0x70 + 4-byte handle, then 0x70 + delivery-id
        did_offset = 8 + 6 + 5 + 1
        seq_abs = 8 + first_perf_len + body_offset_in_sections + seq_offset
        gap_start = did_offset + 4 + 2 + 4
        self.gap = self.data[gap_start:seq_abs]
        self.id_offset = did_offset
        self.struct = struct.Struct(f">I2sI{len(self.gap)}sQq")
        self.size = len(self.data)

    def pack_into(self, buf: bytearray, offset: int, delivery_id: int, seq: int, ts: int) -> None:
        """Write delivery-id/tag, sequence and timestamp into a copy at ``offset``."""
        self.struct.pack_into(buf, offset + self.id_offset, delivery_id, b"\xa0\x04",
                              delivery_id, self.gap, seq, ts)


def _read_uint(b: bytes | bytearray, q: int) -> tuple[int | None, int]:
    c = b[q]
    if c == 0x52:
        return b[q + 1], q + 2
    if c == 0x70:
        return _UNPACK_U32(b, q + 1)[0], q + 5
    if c == 0x43:
        return 0, q + 1
    if c == 0x40:
        return None, q + 1
    raise AmqpDecodeError(f"expected uint, got 0x{c:02x}")


def _read_bool(b: bytes | bytearray, q: int) -> tuple[bool, int]:
    c = b[q]
    if c == 0x56:
        return b[q + 1] != 0, q + 2
    return c == 0x41, q + 1


def parse_disposition(b: bytes | bytearray, p: int,
                      end: int) -> tuple[bool, int, int, bool, int | None]:
    """Read a disposition at ``p``: ``(role, first, last, settled, state_code)``.

    ``state_code`` is the outcome's descriptor (0x24 accepted, 0x25 rejected,
    ...) or None.  Dispositions can arrive once per message, so this avoids
    the generic decoder.
    """
    c = b[p + 3]
    if c == 0xC0:
        count = b[p + 5]
        q = p + 6
    elif c == 0xD0:
        count = _UNPACK_U32(b, p + 8)[0]
        q = p + 12
    else:
        raise AmqpDecodeError("disposition without fields")
    role, q = _read_bool(b, q)
    first, q = _read_uint(b, q)
    last: int | None = None
    settled = False
    state: int | None = None
    if count > 2:
        last, q = _read_uint(b, q)
        if count > 3:
            settled, q = _read_bool(b, q)
            if count > 4 and b[q] == 0x00:
                state = b[q + 2] if b[q + 1] == 0x53 else _UNPACK_U32(b, q + 6)[0]
                # 0x80 ulong descriptor: low 32 bits hold the code
    if first is None:
        raise AmqpDecodeError("disposition without first")
    return role, first, first if last is None else last, settled, state
