"""The stored form of a message: a versioned, self-describing binary record.

Used by persistent stores (journal, JDBC) and anywhere a message crosses a process
boundary inside RelayMQ. No executable serialization: a small JSON header for the
fields, then the body and the transport's encoded bytes verbatim.

Layout: ``b"R1"`` | u32 header length | header (UTF-8 JSON) | u32 body length |
body | u32 encoded length or 0xFFFFFFFF when absent | encoded.

A message whose application properties were never parsed is stored without
them when its encoded form carries them; decoding re-attaches the lazy loader
registered for that encoding (`register_property_loader`). Likewise a message
whose body can be read back from its encoded form (`register_body_reader`, e.g.
AMQP, where the body is a section of the bytes) is stored without a second copy
of the body.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any, Final

from relaymq.model.destination import Destination
from relaymq.model.jtypes import Float32, Int32
from relaymq.model.message import Message, PropertyLoader

MAGIC: Final = b"R1"
MAGIC2: Final = b"R2"
_U32: Final = struct.Struct(">I")
_NONE: Final = 0xFFFFFFFF

_loaders: Final[dict[str, PropertyLoader]] = {}
#: encoding -> the body of a message, read from its encoded bytes
BodyReader = Callable[[bytes], bytes]
_body_readers: Final[dict[str, BodyReader]] = {}


class CorruptMessage(ValueError):
    """A stored message record that cannot be decoded."""


def register_property_loader(encoding: str, loader: PropertyLoader) -> None:
    """Let stored messages of `encoding` parse their properties lazily after recovery."""
    _loaders[encoding] = loader


def register_body_reader(encoding: str, reader: BodyReader) -> None:
    """Store messages of `encoding` without their body, which `reader` reads back
    from the encoded bytes (it must return exactly the body the transport gave the
    message). Register it before stores start: records written this way need it."""
    _body_readers[encoding] = reader


def _encode_v1(m: Message) -> bytes:
    """The first record format (JSON header); still decoded, no longer written."""
    h: dict[str, Any] = {}
    if m.message_id is not None:
        h["id"] = m.message_id
    if m.destination is not None:
        h["d"] = m.destination.key
    if m.durable:
        h["p"] = 1
    if m.priority != 4:
        h["pr"] = m.priority
    if m.expiration:
        h["x"] = m.expiration
    if m.timestamp:
        h["t"] = m.timestamp
    if m.correlation_id is not None:
        h["c"] = m.correlation_id
    if m.reply_to is not None:
        h["r"] = m.reply_to.key
    if m.type is not None:
        h["ty"] = m.type
    if m.group_id is not None:
        h["g"] = m.group_id
    if m.group_seq:
        h["gs"] = m.group_seq
    if m.user_id is not None:
        h["u"] = m.user_id
    if m.content_type is not None:
        h["ct"] = m.content_type
    if m.body_type != "bytes":
        h["bt"] = m.body_type
    lazy = m._properties is None and m._loader is not None and m.encoding in _loaders
    if not lazy:
        props = m.properties
        if props:
            h["pp"] = _encode_props(props)
    if m.annotations:
        h["a"] = _encode_props(m.annotations)
    if m.encoding is not None:
        h["e"] = m.encoding
    if m.origin is not None:
        h["o"] = m.origin
    if m.producer_id is not None:
        h["pi"] = m.producer_id
    if m.scheduled_delay or m.scheduled_period or m.scheduled_repeat:
        h["s"] = [m.scheduled_delay, m.scheduled_period, m.scheduled_repeat]
    header = json.dumps(h, separators=(",", ":"), ensure_ascii=False).encode()
    enc = m.encoded
    parts = [MAGIC, _U32.pack(len(header)), header, _U32.pack(len(m.body)), m.body]
    if enc is None:
        parts.append(_U32.pack(_NONE))
    else:
        parts += [_U32.pack(len(enc)), enc]
    return b"".join(parts)


def decode_message(data: bytes | memoryview) -> Message:
    try:
        buf = memoryview(data)
        if bytes(buf[:2]) == MAGIC2:
            return _decode_v2(buf)
        return _decode(buf)
    except CorruptMessage:
        raise
    except (ValueError, KeyError, TypeError, struct.error, IndexError) as exc:
        raise CorruptMessage(f"undecodable message record: {exc}") from exc


def _decode(buf: memoryview) -> Message:
    if bytes(buf[:2]) != MAGIC:
        raise CorruptMessage("not a RelayMQ message record (bad magic)")
    pos = 2
    (hl,) = _U32.unpack_from(buf, pos)
    pos += 4
    h = json.loads(bytes(buf[pos:pos + hl]))
    pos += hl
    (bl,) = _U32.unpack_from(buf, pos)
    pos += 4
    body = bytes(buf[pos:pos + bl])
    if len(body) != bl:
        raise CorruptMessage("message record truncated in body")
    pos += bl
    (el,) = _U32.unpack_from(buf, pos)
    pos += 4
    encoded = None
    if el != _NONE:
        encoded = bytes(buf[pos:pos + el])
        if len(encoded) != el:
            raise CorruptMessage("message record truncated in encoded form")
    encoding = h.get("e")
    props = _decode_props(h["pp"]) if "pp" in h else None
    loader = None
    if props is None:
        loader = _loaders.get(encoding) if encoding and encoded is not None else None
        if loader is None:
            props = {}
    m = Message(
        body,
        destination=Destination.parse(h["d"]) if "d" in h else None,
        message_id=h.get("id"),
        durable=bool(h.get("p", 0)),
        priority=h.get("pr", 4),
        expiration=h.get("x", 0),
        timestamp=h.get("t", 0),
        correlation_id=h.get("c"),
        reply_to=Destination.parse(h["r"]) if "r" in h else None,
        type=h.get("ty"),
        group_id=h.get("g"),
        group_seq=h.get("gs", 0),
        user_id=h.get("u"),
        content_type=h.get("ct"),
        body_type=h.get("bt", "bytes"),
        properties=props,
        loader=loader,
        annotations=_decode_props(h["a"]) if "a" in h else None,
        encoded=encoded,
        encoding=encoding,
        origin=h.get("o"),
        producer_id=h.get("pi"),
    )
    if "s" in h:
        m.scheduled_delay, m.scheduled_period, m.scheduled_repeat = h["s"]
    return m


def _encode_props(props: dict[str, Any]) -> dict[str, Any]:
    """JSON keeps str/int/float/bool/None; bytes and other types are tagged."""
    out: dict[str, Any] = {}
    for k, v in props.items():
        if isinstance(v, (bytes, bytearray, memoryview)):
            out[k] = {"$b": bytes(v).hex()}
        elif isinstance(v, Float32):  # Java float: kept apart from double for selectors
            out[k] = {"$g": repr(float(v))}
        elif isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            out[k] = {"$f": repr(v)}
        elif isinstance(v, Int32):  # Java int: kept apart from long for selectors
            out[k] = {"$i": int(v)}
        elif v is None or isinstance(v, (str, int, float, bool)):
            out[k] = v
        else:
            out[k] = {"$s": str(v)}
    return out


def _decode_props(props: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in props.items():
        if isinstance(v, dict):
            if "$b" in v:
                v = bytes.fromhex(v["$b"])
            elif "$f" in v:
                v = float(v["$f"])
            elif "$i" in v:
                v = Int32(v["$i"])
            elif "$g" in v:
                v = Float32(float(v["$g"]))
            else:
                v = v.get("$s")
        out[k] = v
    return out


# -- format 2: a struct header with presence bits (no JSON unless properties) ------------
#
# b"R2" | u32 flags | u8 priority | i64 expiration | i64 timestamp | i64 group_seq |
# then, for each set bit in _V2_FIELDS order, u32 length + UTF-8 | optional
# scheduling (3 x i64) | optional JSON properties, annotations | u32 body length |
# body (absent with _F_BODY_IN_ENCODED) | optional u32 encoded length + encoded.

_FIXED: Final = struct.Struct(">IBqqq")
_SCHED: Final = struct.Struct(">qqq")
_F_DURABLE: Final = 1 << 0
_F_ENCODED: Final = 1 << 1
_F_SCHED: Final = 1 << 2
_F_PROPS: Final = 1 << 3
_F_ANN: Final = 1 << 4
_F_BODY_IN_ENCODED: Final = 1 << 5  # no body section: the encoding's body reader finds it in encoded
_V2_FIELDS: Final = ("message_id", "destination", "correlation_id", "reply_to", "type", "group_id",
              "user_id", "content_type", "body_type", "encoding", "origin", "producer_id")
_STR_BIT: Final = {name: 1 << (8 + i) for i, name in enumerate(_V2_FIELDS)}
_TIMESTAMP_AT: Final = 15  # b"R2" | u32 flags | u8 priority | i64 expiration | i64 timestamp
_HEADER_END: Final = 31
_SCHED_SIZE: Final = 24
_I64_WRAP: Final = 1 << 63
_U64_RANGE: Final = 1 << 64
_BIT_MESSAGE_ID: Final = 1 << 8
_BIT_DESTINATION: Final = 1 << 9
_BIT_CORRELATION_ID: Final = 1 << 10
_BIT_REPLY_TO: Final = 1 << 11
_BIT_TYPE: Final = 1 << 12
_BIT_GROUP_ID: Final = 1 << 13
_BIT_USER_ID: Final = 1 << 14
_BIT_CONTENT_TYPE: Final = 1 << 15
_BIT_BODY_TYPE: Final = 1 << 16
_BIT_ENCODING: Final = 1 << 17
_BIT_ORIGIN: Final = 1 << 18
_BIT_PRODUCER_ID: Final = 1 << 19  # the last: encoded_span walks the bits up to it
# the string fields' bits as native constants (compiled: no look-up in the globals)
assert [_BIT_MESSAGE_ID, _BIT_DESTINATION, _BIT_CORRELATION_ID, _BIT_REPLY_TO, _BIT_TYPE,
        _BIT_GROUP_ID, _BIT_USER_ID, _BIT_CONTENT_TYPE, _BIT_BODY_TYPE, _BIT_ENCODING,
        _BIT_ORIGIN, _BIT_PRODUCER_ID] == [_STR_BIT[name] for name in _V2_FIELDS]
_pack_u32: Final = _U32.pack


def json_encoder(ensure_ascii: bool) -> Callable[[Any], str]:
    """A compact JSON encoder (``separators=(",", ":")``) for flat values: what
    `json.JSONEncoder(...).encode` writes, without its per-call work (it builds
    the C encoder and a table for finding circular references on every call,
    which is most of the cost of encoding a few properties). Only for values
    that cannot contain themselves: properties, annotations, a record's fields."""
    base = json.JSONEncoder(separators=(",", ":"), ensure_ascii=ensure_ascii)
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the encoder as it is
        return base.encode
    quote = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    chunks = make(None, base.default, quote, None, ":", ",", False, False, True)

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


#: JSON for properties and annotations, made once (json.dumps with options builds an encoder per call)
_to_json: Final = json_encoder(False)


def json_map(props: dict[str, Any]) -> dict[str, Any]:
    """A properties or annotations map as JSON keeps it (typed values tagged);
    `from_json_map` reads it back with the same types."""
    return _encode_props(props)


def from_json_map(data: dict[str, Any]) -> dict[str, Any]:
    return _decode_props(data)


_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1


def unstorable_field(m: Message) -> str | None:
    """The name of a fixed-width field of `m` the stored record cannot keep (a
    64-bit one out of range), or None: a store write with it would fail, and with
    it every other send of that write, so the writer refuses this send alone."""
    # compared one by one: this runs for every stored send, a tuple per field
    # (and a loop over them) cost more than the checks
    if not _I64_MIN <= m.expiration <= _I64_MAX:
        return "expiration"
    if not _I64_MIN <= m.timestamp <= _I64_MAX:
        return "timestamp"
    if not _I64_MIN <= m.group_seq <= _I64_MAX:
        return "group_seq"
    if not _I64_MIN <= m.scheduled_delay <= _I64_MAX:
        return "scheduled_delay"
    if not _I64_MIN <= m.scheduled_period <= _I64_MAX:
        return "scheduled_period"
    if not _I64_MIN <= m.scheduled_repeat <= _I64_MAX:
        return "scheduled_repeat"
    return None


def encode_message(m: Message) -> bytes:
    """The stored form of `m` (format 2)."""
    flags = _F_DURABLE if m.durable else 0
    parts: list[bytes] = [b""]  # the fixed header goes first, once the flags are known
    append = parts.append
    # The string fields, in _V2_FIELDS order (most are usually absent); compiled,
    # a native call per field on a Final bit (a zip over a tuple of them was not).
    dest, reply_to, body_type = m.destination, m.reply_to, m.body_type
    flags = _put_text(parts, flags, _BIT_MESSAGE_ID, m.message_id)
    flags = _put_text(parts, flags, _BIT_DESTINATION, None if dest is None else dest.key)
    flags = _put_text(parts, flags, _BIT_CORRELATION_ID, m.correlation_id)
    flags = _put_text(parts, flags, _BIT_REPLY_TO, None if reply_to is None else reply_to.key)
    flags = _put_text(parts, flags, _BIT_TYPE, m.type)
    flags = _put_text(parts, flags, _BIT_GROUP_ID, m.group_id)
    flags = _put_text(parts, flags, _BIT_USER_ID, m.user_id)
    flags = _put_text(parts, flags, _BIT_CONTENT_TYPE, m.content_type)
    flags = _put_text(parts, flags, _BIT_BODY_TYPE, None if body_type == "bytes" else body_type)
    flags = _put_text(parts, flags, _BIT_ENCODING, m.encoding)
    flags = _put_text(parts, flags, _BIT_ORIGIN, m.origin)
    flags = _put_text(parts, flags, _BIT_PRODUCER_ID, m.producer_id)
    if m.scheduled_delay or m.scheduled_period or m.scheduled_repeat:
        flags |= _F_SCHED
        append(_SCHED.pack(m.scheduled_delay, m.scheduled_period, m.scheduled_repeat))
    lazy = m._properties is None and m._loader is not None and m.encoding in _loaders
    if not lazy:
        props = m.properties
        if props:
            flags |= _F_PROPS
            raw = _to_json(_encode_props(props)).encode()
            append(_pack_u32(len(raw)))
            append(raw)
    if m.annotations:
        flags |= _F_ANN
        raw = _to_json(_encode_props(m.annotations)).encode()
        append(_pack_u32(len(raw)))
        append(raw)
    enc = m.encoded
    if enc is not None and m.encoding in _body_readers:
        flags |= _F_BODY_IN_ENCODED
    else:
        body = m.body
        append(_pack_u32(len(body)))
        append(body)
    if enc is not None:
        flags |= _F_ENCODED
        append(_pack_u32(len(enc)))
        append(enc)
    parts[0] = MAGIC2 + _FIXED.pack(flags, m.priority & 0xFF, m.expiration, m.timestamp,
                                    m.group_seq)
    return b"".join(parts)


def _put_text(parts: list[bytes], flags: int, bit: int, v: str | None) -> int:
    """Append string field `v` (length and UTF-8) when it is set; the flags with its bit."""
    if v is None:
        return flags
    raw = v.encode()
    parts.append(_pack_u32(len(raw)))
    parts.append(raw)
    return flags | bit


def encoded_span(data: bytes, encoding: str) -> tuple[int, int, int]:
    """Where a stored record keeps its message's transport bytes when they are of
    `encoding`: ``(timestamp, start, end)`` (``data[start:end]`` are the bytes as
    the transport gave them, the body included), read from the record's header
    alone, so a store can hand the bytes on without building a `Message`.
    ``(timestamp, -1, -1)`` when the record holds no bytes of that encoding, and
    ``(0, -1, -1)`` for a record of format 1: decode those with `decode_message`.
    Raises `CorruptMessage` for a record that ends before its fields do."""
    if not data.startswith(MAGIC2):
        if data.startswith(MAGIC):
            return 0, -1, -1
        raise CorruptMessage("not a RelayMQ message record (bad magic)")
    size = len(data)
    if size < _HEADER_END:
        raise CorruptMessage("message record truncated in its header")
    # byte arithmetic rather than struct calls: this runs once per message a range read
    # hands on, and compiled it is several times faster
    flags = _u32(data, 2)
    timestamp = (_u32(data, _TIMESTAMP_AT) << 32) | _u32(data, _TIMESTAMP_AT + 4)
    if timestamp >= _I64_WRAP:
        timestamp -= _U64_RANGE  # an i64: before 1970
    pos = _HEADER_END
    wanted = encoding.encode()
    same = False
    bit = _BIT_MESSAGE_ID
    while bit <= _BIT_PRODUCER_ID:
        if flags & bit:
            if pos + 4 > size:
                raise CorruptMessage("message record truncated in its fields")
            n = _u32(data, pos)
            pos += 4
            if bit == _BIT_ENCODING:
                same = n == len(wanted) and data[pos:pos + n] == wanted
            pos += n
        bit <<= 1
    if not same or not flags & _F_ENCODED:
        return timestamp, -1, -1
    if flags & _F_SCHED:
        pos += _SCHED_SIZE
    for part in (_F_PROPS, _F_ANN):
        if flags & part:
            if pos + 4 > size:
                raise CorruptMessage("message record truncated in its properties")
            pos += 4 + _u32(data, pos)
    if not flags & _F_BODY_IN_ENCODED:
        if pos + 4 > size:
            raise CorruptMessage("message record truncated in body")
        pos += 4 + _u32(data, pos)
    if pos + 4 > size:
        raise CorruptMessage("message record truncated in encoded form")
    n = _u32(data, pos)
    pos += 4
    if pos + n > size:
        raise CorruptMessage("message record truncated in encoded form")
    return timestamp, pos, pos + n


def _u32(data: bytes, pos: int) -> int:
    """The big-endian u32 at `pos` (the caller checked that 4 bytes are there)."""
    return (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]


def _stored_body(encoding: str | None, encoded: bytes | None) -> bytes:
    reader = _body_readers.get(encoding) if encoding else None
    if reader is None or encoded is None:
        raise CorruptMessage(
            f"the message's body is kept in its {encoding!r} encoded form and no installed "
            f"plugin reads that encoding (install the transport plugin that stored it, "
            f"e.g. pip install relaymq-{encoding})")
    try:
        return reader(encoded)
    except Exception as exc:  # noqa: BLE001 - any failure of the reader means unreadable bytes
        raise CorruptMessage(f"the {encoding!r} encoded form holds no readable body: {exc}") from exc


def _decode_v2(buf: memoryview) -> Message:
    flags, priority, expiration, timestamp, group_seq = _FIXED.unpack_from(buf, 2)
    pos = 2 + _FIXED.size
    unpack = _U32.unpack_from
    fields: dict[str, Any] = {}
    for name in _V2_FIELDS:
        if flags & _STR_BIT[name]:
            (n,) = unpack(buf, pos)
            pos += 4
            fields[name] = str(buf[pos:pos + n], "utf-8")
            pos += n
    sched = None
    if flags & _F_SCHED:
        sched = _SCHED.unpack_from(buf, pos)
        pos += _SCHED.size
    props = None
    if flags & _F_PROPS:
        (n,) = unpack(buf, pos)
        pos += 4
        props = _decode_props(json.loads(bytes(buf[pos:pos + n])))
        pos += n
    annotations = None
    if flags & _F_ANN:
        (n,) = unpack(buf, pos)
        pos += 4
        annotations = _decode_props(json.loads(bytes(buf[pos:pos + n])))
        pos += n
    body = b""
    if not flags & _F_BODY_IN_ENCODED:
        (n,) = unpack(buf, pos)
        pos += 4
        body = bytes(buf[pos:pos + n])
        if len(body) != n:
            raise CorruptMessage("message record truncated in body")
        pos += n
    encoded = None
    if flags & _F_ENCODED:
        (n,) = unpack(buf, pos)
        pos += 4
        encoded = bytes(buf[pos:pos + n])
        if len(encoded) != n:
            raise CorruptMessage("message record truncated in encoded form")
    encoding = fields.get("encoding")
    if flags & _F_BODY_IN_ENCODED:
        body = _stored_body(encoding, encoded)
    loader = None
    if props is None:
        loader = _loaders.get(encoding) if encoding and encoded is not None else None
        if loader is None:
            props = {}
    dest = fields.get("destination")
    reply = fields.get("reply_to")
    m = Message(
        body, destination=Destination.parse(dest) if dest else None,
        message_id=fields.get("message_id"), durable=bool(flags & _F_DURABLE),
        priority=priority, expiration=expiration, timestamp=timestamp,
        correlation_id=fields.get("correlation_id"),
        reply_to=Destination.parse(reply) if reply else None, type=fields.get("type"),
        group_id=fields.get("group_id"), group_seq=group_seq, user_id=fields.get("user_id"),
        content_type=fields.get("content_type"), body_type=fields.get("body_type", "bytes"),
        properties=props, loader=loader, annotations=annotations, encoded=encoded,
        encoding=encoding, origin=fields.get("origin"), producer_id=fields.get("producer_id"),
    )
    if sched is not None:
        m.scheduled_delay, m.scheduled_period, m.scheduled_repeat = sched
    return m
