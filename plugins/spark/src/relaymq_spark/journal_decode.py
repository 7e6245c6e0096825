"""Column-wise decoding of kahaDB journal files for `format("relaymq-journal")`.

`decode_messages(buf, file_id, keys, names)` walks every valid batch record of
one data file (relaymq-kahadb's `scan`: checksums, torn tails and damaged spans
skipped as recovery skips them) and appends each message record (ADD, MOVE,
REF) to plain per-column lists of a `Columns`: no kernel `Message`, no row
tuple, no dict per record. A body is not copied at all: the row keeps its
bounds in the file (`Columns.body_bounds`). `journal.py` turns the lists into
Arrow arrays in one call per column, and gathers the bodies from the mapped
file in one.

The stored records are the kernel codec's format 2 (``R2``: a struct header,
the string fields, optional JSON properties and annotations, the body or the
transport's encoded bytes); an AMQP message keeps its body and application
properties inside its encoded bytes, and the common shape (a body after an
empty or durable-only header) is recognised in place. Anything else -- format
1 records, unusual bodies -- goes through the kernel codec, record by record.

Compiled with mypyc (`[tool.relaymq.compile]` of relaymq-spark): keep it free of
pyspark and pyarrow.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Final

from relaymq_amqp.scanner import DecodeError, body_value, decode, decode_map_at, skip
from relaymq_amqp.scanner import scan as scan_amqp
from relaymq_kahadb.journal.records import (
    OP_ADD,
    OP_MOVE,
    OP_REF,
    REC_HEADER_LEN,
    RT_BATCH,
    Buffer,
    scan,
)

from relaymq_spark.columns import Columns, add_properties, other_body, text
from relaymq_spark.transfers import u32 as _u32
from relaymq_spark.transfers import u64 as _u64

_SEQ_FILE = struct.Struct(">QI")
_UPTO: Final = struct.Struct(">QH")
# Final: compiled, a constant is a C value, not a look-up in the module's globals
_F_DURABLE: Final = 1 << 0
_F_ENCODED: Final = 1 << 1
_F_SCHED: Final = 1 << 2
_F_PROPS: Final = 1 << 3
_F_ANN: Final = 1 << 4
_F_BODY_IN_ENCODED: Final = 1 << 5
# the string fields of format 2, in order: message_id, destination, correlation_id,
# reply_to, type, group_id, user_id, content_type, body_type, encoding, origin, producer_id
_N_STR: Final = 12
#: the string fields no column shows: destination (the op's key is used), origin,
#: producer_id -- skipped undecoded; encoding (9) is only compared with "amqp"
_ENCODING: Final = 9
_I64_WRAP: Final = 1 << 63
# relaymq_kahadb's op codes as constants of this module (compiled, an imported name is
# a look-up in the module's globals at every use)
_OP_ADD: Final = 1
_OP_MOVE: Final = 2
_OP_REF: Final = 3
assert (_OP_ADD, _OP_MOVE, _OP_REF) == (OP_ADD, OP_MOVE, OP_REF)
_RECORD_HEAD: Final = 11  # a record's header: its payload follows
assert _RECORD_HEAD == REC_HEADER_LEN
_U64_RANGE: Final = 1 << 64
# the kernel's body types (relaymq.model.message.BodyType) whose stored bytes are not
# what a row shows
_AMQP_VALUE: Final = "amqp-value"
_AMQP_SEQUENCE: Final = "amqp-sequence"
_EMPTY: Final = "empty"


def _i64(p: bytes, pos: int) -> int:
    v = _u64(p, pos)
    return v - _U64_RANGE if v >= _I64_WRAP else v


def _json_value(v: Any) -> Any:
    """A property value as the kernel codec's JSON tags it, back to a plain value."""
    if isinstance(v, dict):
        if "$b" in v:
            return bytes.fromhex(str(v["$b"]))
        if "$f" in v:
            return float(str(v["$f"]))
        if "$g" in v:
            return float(str(v["$g"]))
        if "$i" in v:
            return int(v["$i"])
        return v.get("$s")
    return v


def _json_map(raw: bytes) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        return {}
    return {str(k): _json_value(v) for k, v in value.items()}


def _amqp_in_place(p: bytes, start: int, end: int) -> tuple[int, int, int, int] | None:
    """For the AMQP message at p[start:end] whose body is one data section or one
    amqp-value string/binary: (body start, body end, application-properties
    start or -1, its end); None for any other shape (then `_amqp_parts`). The
    header, properties and annotations are skipped unread: the stored record's
    own fields already hold what the columns need."""
    pos = start
    ap_start = -1
    ap_end = -1
    while pos < end:
        if p[pos] != 0 or p[pos + 1] != 0x53:
            return None
        code = p[pos + 2]
        pos += 3
        if code == 0x75 or code == 0x77:  # data, amqp-value: the body must end the message
            c = p[pos]
            if c == 0xB0 or c == 0xB1:
                b = pos + 5
                e = b + _u32(p, pos + 1)
            elif c == 0xA0 or c == 0xA1:
                b = pos + 2
                e = b + p[pos + 1]
            else:
                return None
            if e != end or (code == 0x75 and (c == 0xA1 or c == 0xB1)):
                return None
            return b, e, ap_start, ap_end
        if code < 0x70 or code > 0x74:  # not header, annotations, properties
            return None
        after = skip(p, pos)
        if code == 0x74:
            ap_start = pos
            ap_end = after
        pos = after
    return None


def _amqp_parts(enc: bytes) -> tuple[bytes | None, dict[Any, Any]]:
    """Body and application properties of an AMQP message that is not plain; the
    body as a live read shows it (`columns.add_encoded`): none for a null body,
    another value as text."""
    try:
        s = scan_amqp(enc)
    except DecodeError:
        return enc, {}
    kind, raw = body_value(enc, s)
    body: bytes | None = raw
    if kind == "null":
        body = None
    elif kind != "data" and kind != "binary" and kind != "string":
        body = other_body(enc)
    try:
        props = decode_map_at(enc, s.application_properties)
    except DecodeError:
        props = {}
    return body, props


def _amqp_map(p: bytes, pos: int) -> dict[Any, Any]:
    """The application-properties map at `pos` ({} when unreadable, as the broker
    reads them)."""
    try:
        value = decode(p, pos)[0]
    except DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _append(c: Columns, key: str, seq: int, offset: int, op: str, body_at: int,
            body_end: int, body: bytes | None, fields: list[str | None], flags: int,
            priority: int, expiration: int, timestamp: int, props: dict[Any, Any],
            annotations: dict[str, Any]) -> None:
    """One row; its body is data[body_at:body_end] of the file, or (body_at < 0)
    `body` itself."""
    bounds = c.body_bounds
    if body_at >= 0:
        if body_at < c.body_last:
            c.body_sorted = False
        bounds.append(body_at)
        bounds.append(body_end)
        c.body_last = body_end
    else:
        c.body_other[len(c.sequence)] = body
        bounds.append(c.body_last)
        bounds.append(c.body_last)
    c.message_id.append(fields[0])
    c.destination.append(key)
    c.sequence.append(seq)
    c.timestamp.append(timestamp if timestamp else None)
    c.expiration.append(expiration if expiration else None)
    c.priority.append(priority)
    c.redelivered.append(False)
    c.correlation_id.append(fields[2])
    c.type.append(fields[4])
    c.group_id.append(fields[5])
    hk = c.h_keys
    hv = c.h_values
    if flags & _F_DURABLE:
        hk.append("durable")
        hv.append("true")
    v = fields[7]
    if v:
        hk.append("content_type")
        hv.append(v)
    v = fields[3]
    if v:
        hk.append("reply_to")
        hv.append(v)
    v = fields[6]
    if v:
        hk.append("user_id")
        hv.append(v)
    if annotations:
        for k, a in annotations.items():
            hk.append(str(k))
            hv.append(text(a) or "")
    c.h_offsets.append(len(hk))
    add_properties(c, props, fields[8] or "bytes")
    c.journal_offset.append(offset)
    c.op.append(op)


def _message(c: Columns, p: bytes, base: int, m: int, ln: int, key: str, seq: int,
             offset: int, op: str) -> None:
    """Append the stored message p[m:m+ln] (kernel codec record) to `c`; p[0] is at
    `base` in the file."""
    end = m + ln
    if end > len(p):
        raise ValueError("a message runs past its record")
    if ln < 31 or p[m] != 0x52 or p[m + 1] != 0x32:  # not b"R2" and its header
        _legacy(c, p[m:end], key, seq, offset, op)
        return
    # the format 2 header (">IBqqq" after b"R2"), read without struct calls
    flags = _u32(p, m + 2)
    priority = p[m + 6]
    expiration = _i64(p, m + 7)
    timestamp = _i64(p, m + 15)
    pos = m + 2 + 29
    fields: list[str | None] = [None] * _N_STR
    amqp = False
    bit = 1 << 8
    for i in range(_N_STR):
        if flags & bit:
            n = _u32(p, pos)
            pos += 4
            if i == _ENCODING:
                amqp = n == 4 and p[pos:pos + 4] == b"amqp"
            elif i != 1 and i < 10:
                fields[i] = p[pos:pos + n].decode()
            pos += n
        bit <<= 1
    if flags & _F_SCHED:
        pos += 24
    props: dict[Any, Any] = {}
    if flags & _F_PROPS:
        n = _u32(p, pos)
        pos += 4
        props = _json_map(p[pos:pos + n])
        pos += n
    annotations: dict[str, Any] = {}
    if flags & _F_ANN:
        n = _u32(p, pos)
        pos += 4
        annotations = _json_map(p[pos:pos + n])
        pos += n
    body_at = -1  # the body's bounds in p, once found
    body_end = -1
    body: bytes | None = None  # a body that is not in p as such
    found_body = False
    if not flags & _F_BODY_IN_ENCODED:
        n = _u32(p, pos)
        pos += 4
        body_at = pos
        body_end = pos + n
        found_body = True
        pos += n
    if flags & _F_ENCODED:
        n = _u32(p, pos)
        pos += 4
        es = pos
        ee = pos + n
        if ee > end:
            raise ValueError("message record truncated in encoded form")
        if amqp and (not found_body or not flags & _F_PROPS):
            found = _amqp_in_place(p, es, ee)
            if found is not None:
                if not found_body:
                    body_at = found[0]
                    body_end = found[1]
                    found_body = True
                if not flags & _F_PROPS and found[2] >= 0:
                    props = _amqp_map(p, found[2])
            else:
                amqp_body, amqp_props = _amqp_parts(p[es:ee])
                if not found_body:
                    body = amqp_body
                    found_body = True
                if not flags & _F_PROPS:
                    props = amqp_props
        bt = fields[8]
        if amqp and (bt == _AMQP_VALUE or bt == _AMQP_SEQUENCE):
            body = other_body(p[es:ee])  # another value as text, as a live read shows it
            body_at = -1
            found_body = True
    if fields[8] == _EMPTY:  # an AMQP null body: none, as a live read shows it
        body = None
        body_at = -1
        found_body = True
    if not found_body:
        _legacy(c, p[m:end], key, seq, offset, op)  # an encoding this reader does not know
        return
    if body_at >= 0:
        body_at += base
        body_end += base
    _append(c, key, seq, offset, op, body_at, body_end, body, fields, flags, priority,
            expiration, timestamp, props, annotations)


def _legacy(c: Columns, record: bytes, key: str, seq: int, offset: int, op: str) -> None:
    """A record the fast path does not read (format 1, another encoding): through
    the kernel codec. An undecodable one is skipped."""
    from relaymq.model.codec import decode_message

    try:
        msg = decode_message(record)
        props = dict(msg.properties or {})
    except Exception:  # noqa: BLE001 - a damaged message: skip it
        return
    body = msg.body
    fields: list[str | None] = [None] * _N_STR
    fields[0] = text(msg.message_id)
    fields[2] = text(msg.correlation_id)
    fields[3] = text(msg.reply_to)
    fields[4] = text(msg.type)
    fields[5] = text(msg.group_id)
    fields[6] = text(msg.user_id)
    fields[7] = text(msg.content_type)
    fields[8] = text(msg.body_type)
    _append(c, key, seq, offset, op, -1, -1, None if body is None else bytes(body), fields,
            _F_DURABLE if msg.durable else 0, int(msg.priority), int(msg.expiration or 0),
            int(msg.timestamp or 0), props, dict(msg.annotations or {}))


def decode_messages(buf: Buffer, file_id: int, keys: set[str] | None,
                    names: list[str]) -> Columns:
    """The message records (ADD, MOVE, REF) of data file `file_id` held in `buf`
    (an mmap of it, or its bytes), of the destinations `keys` (None: all); the
    rows' body bounds are offsets in `buf`."""
    c = Columns(names)
    interned: dict[bytes, str] = {}
    for offset, rtype, payload in scan(buf, file_id):
        if rtype != RT_BATCH:
            continue
        p = bytes(payload)  # compiled, indexing bytes is a C operation, an mmap's is not
        mark = len(c)
        try:
            _batch(c, p, offset + _RECORD_HEAD, offset, keys, interned)
        except (ValueError, IndexError, struct.error):
            _truncate(c, mark)  # a record that does not parse: skip it whole, as recovery does
    return c


def _batch(c: Columns, p: bytes, base: int, offset: int, keys: set[str] | None,
           interned: dict[bytes, str]) -> None:
    """The operations of the record payload `p`, which starts at `base` in the file."""
    end = len(p)
    pos = 0
    while pos < end:
        code = p[pos]
        kl = (p[pos + 1] << 8) | p[pos + 2]
        pos += 3
        kb = p[pos:pos + kl]
        key = interned.get(kb)
        if key is None:
            key = kb.decode()
            interned[kb] = key
        pos += kl
        wanted = keys is None or key in keys
        if code == _OP_ADD or code == _OP_MOVE:
            seq = _u64(p, pos)
            ln = _u32(p, pos + 12)
            pos += 16
            if wanted:
                _message(c, p, base, pos, ln, key, seq, offset,
                         "add" if code == _OP_ADD else "move")
            pos += ln
        elif code == _OP_REF:
            seq = _u64(p, pos)
            rel = _u32(p, pos + 8)
            ln = _u32(p, pos + 12)
            pos += 16
            if wanted:
                _message(c, p, base, rel, ln, key, seq, offset, "ref")
        else:
            pos = _skip_op(p, pos, code)


def _skip_op(p: bytes, pos: int, code: int) -> int:
    """Past the operands of a non-message op (relaymq_kahadb.journal.records)."""
    if code == 4 or code == 5:  # REMOVE, ACK_FWD
        return pos + 12
    if code == 6:  # ADD_DEST
        return pos
    if code == 7 or code == 9 or code == 10:  # REMOVE_DEST, REMOVE_SUB, PURGE
        n = _UPTO.unpack_from(p, pos)[1]
        return pos + 10 + 4 * n
    if code == 8:  # ADD_SUB
        return pos + 4 + _u32(p, pos)
    if code == 11:  # ADD_DUPID
        return pos + 10 + ((p[pos + 8] << 8) | p[pos + 9])
    if code == 12:  # REMOVE_DUPID
        return pos + 8
    if code == 13:  # REMOVE_RUN: count, then a seq (u64) and a file (u32) per message
        return pos + 4 + 12 * _u32(p, pos)
    raise ValueError(f"unknown operation code {code}")


def _truncate(c: Columns, n: int) -> None:
    """Drop the rows after the first `n` (a record that failed half way)."""
    if len(c) == n:
        return
    cols: list[list[Any]] = [c.message_id, c.destination, c.sequence, c.timestamp,
                             c.expiration, c.priority, c.redelivered, c.correlation_id, c.type,
                             c.group_id, c.journal_offset, c.op]
    for col in cols:
        del col[n:]
    hn = c.h_offsets[n]
    del c.h_offsets[n + 1:]
    del c.h_keys[hn:]
    del c.h_values[hn:]
    del c.body_type[n:]
    pn = c.p_offsets[n]
    del c.p_offsets[n + 1:]
    del c.p_keys[pn:]
    del c.p_values[pn:]
    for extra in c.extra:
        del extra[n:]
    del c.body_bounds[2 * n:]
    for row in [r for r in c.body_other if r >= n]:
        del c.body_other[row]
    c.body_last = c.body_bounds[-1] if c.body_bounds else 0
