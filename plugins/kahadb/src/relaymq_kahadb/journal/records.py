"""The on-disk format of the journal: data files, records and the operations inside.

A data file `db-<n>.log` starts with a 16-byte file header and holds records back
to back. A record is one atomic unit, usually one `PersistenceAdapter.write()`
batch; it is written whole or, after a crash, recognised as torn and dropped whole.

Record header (11 bytes, big-endian)::

    magic b"\\xe4\\x1b" | type u8 | payload length u32 | crc32 u32

The checksum covers the payload and is *seeded with the record's own file id and
offset*, so a stale record (left behind a shorter rewrite) or a record-shaped
message body found while resynchronising after damage never validates at a
position it was not written at.

Payload of a batch record: operations back to back, each ``op u8 | key length u16
| key UTF-8`` then per op:

=============  =====================================================================
ADD / MOVE     seq u64, crc32 u32 of the message, length u32, message bytes (the
               kernel codec's `encode_message` output, verbatim)
REF            seq u64, offset u32 of an earlier ADD/MOVE's message in this payload,
               length u32 (fan-out of one message to many keys stores it once)
REMOVE         seq u64, target file u32 (where the message lived; 0xFFFFFFFF unknown)
REMOVE_RUN     count u32, then seq u64 * count, then target file u32 * count: several
               REMOVEs of one key in one op (a turn's acknowledgements of a
               destination); the same as one REMOVE per seq, in order
ACK_FWD        as REMOVE: an ack rewritten forward by compaction
ADD_DEST       (nothing)
REMOVE_DEST,   upto seq u64, count u16, target files u32 * count: every message of the
REMOVE_SUB,    key up to `upto` is gone; targets are the files that held them
PURGE
ADD_SUB        length u32, subscription record as UTF-8 JSON
ADD_DUPID      seq u64, length u16, id bytes: a duplicate-detection id of the address
               `key` (the kernel's `AddDuplicateId`; kept in the index, not in files)
REMOVE_DUPID   seq u64: that id left the address's id cache
=============  =====================================================================

A state record (type STATE) is JSON: the destinations, subscriptions, last
sequence numbers and duplicate-detection ids at that point, written before data files are deleted so that an
index rebuild from the remaining files still knows them.

No executable serialization anywhere: struct and JSON only.
"""

from __future__ import annotations

import json
import mmap
import struct
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from relaymq_kahadb.journal.checksum import crc32

FILE_MAGIC: Final = b"RMQKDB01"
FILE_HEADER: Final = struct.Struct(">8sII")  # magic, file id, crc32 of the first 12 bytes
FILE_HEADER_LEN: Final = FILE_HEADER.size  # 16

REC_MAGIC: Final = b"\xe4\x1b"
REC_HEADER: Final = struct.Struct(">2sBII")
REC_HEADER_LEN: Final = REC_HEADER.size  # 11
_SEED: Final = struct.Struct(">QQBI")

RT_BATCH: Final = 1
RT_STATE: Final = 2
RECORD_TYPES: Final = {RT_BATCH: "batch", RT_STATE: "state"}

OP_ADD: Final = 1
OP_MOVE: Final = 2
OP_REF: Final = 3
OP_REMOVE: Final = 4
OP_ACK_FWD: Final = 5
OP_ADD_DEST: Final = 6
OP_REMOVE_DEST: Final = 7
OP_ADD_SUB: Final = 8
OP_REMOVE_SUB: Final = 9
OP_PURGE: Final = 10
OP_ADD_DUPID: Final = 11
OP_REMOVE_DUPID: Final = 12
OP_REMOVE_RUN: Final = 13
OP_NAMES: Final = {
    OP_ADD: "add", OP_MOVE: "move", OP_REF: "ref", OP_REMOVE: "remove", OP_ACK_FWD: "ack-fwd",
    OP_ADD_DEST: "add-dest", OP_REMOVE_DEST: "remove-dest", OP_ADD_SUB: "add-sub",
    OP_REMOVE_SUB: "remove-sub", OP_PURGE: "purge", OP_ADD_DUPID: "add-dupid",
    OP_REMOVE_DUPID: "remove-dupid", OP_REMOVE_RUN: "remove-run",
}  # fmt: skip

NO_FILE: Final = 0xFFFFFFFF

#: What the scanners read: a whole data file in memory or mapped.
Buffer = bytes | bytearray | memoryview | mmap.mmap

_OPKEY: Final = struct.Struct(">BH")
_MSG: Final = struct.Struct(">QII")  # seq, crc or ref offset, length
_SEQ_FILE: Final = struct.Struct(">QI")
_UPTO: Final = struct.Struct(">QH")
_U32: Final = struct.Struct(">I")
_U64: Final = struct.Struct(">Q")
_DUPID: Final = struct.Struct(">QH")
#: REMOVE_RUN's arrays are big-endian like every other field; `array` packs them in one
#: call (its "Q"/"I" codes are 8 and 4 bytes on every platform RelayMQ builds for,
#: checked here so a platform where they are not fails at import, not on disk)
_SWAP: Final = sys.byteorder == "little"
assert array("Q").itemsize == 8 and array("I").itemsize == 4
#: Bytes between a message's crc field and its first byte: crc u32 + length u32.
MSG_PREFIX = 8


class CorruptRecord(ValueError):
    """A record whose bytes do not parse although its checksum matched (a bug or
    a deliberate forgery); recovery treats it like damage."""


def file_header(file_id: int) -> bytes:
    head = FILE_MAGIC + _U32.pack(file_id)
    return head + _U32.pack(crc32(head))


def check_file_header(buf: bytes | memoryview, file_id: int) -> str | None:
    """None when `buf` starts with the header of data file `file_id`, else why not."""
    if len(buf) < FILE_HEADER_LEN:
        return "shorter than a file header"
    magic, fid, crc = FILE_HEADER.unpack_from(buf, 0)
    if magic != FILE_MAGIC:
        return "not a RelayMQ KahaDB data file (bad magic)"
    if crc32(bytes(buf[:12])) != crc:
        return "file header checksum mismatch"
    if fid != file_id:
        return f"file header says db-{fid}.log"
    return None


def record_crc(file_id: int, offset: int, rtype: int, payload: bytes | memoryview) -> int:
    return crc32(payload, crc32(_SEED.pack(file_id, offset, rtype, len(payload))))


def record_header(file_id: int, offset: int, rtype: int, payload: bytes | memoryview) -> bytes:
    return REC_HEADER.pack(REC_MAGIC, rtype, len(payload),
                           record_crc(file_id, offset, rtype, payload))


# ---------------------------------------------------------------------------
# Encoding (the adapter's write path and compaction)
# ---------------------------------------------------------------------------

#: A parsed/encoded operation. Shapes, by op code:
#: ADD/MOVE/REF: (op, key, seq, msg_offset_in_payload, length)
#: REMOVE/ACK_FWD: (op, key, seq, target_file)
#: REMOVE_RUN: (op, key, seqs, target_files) (two sequences of equal length)
#: ADD_DEST: (op, key)
#: REMOVE_DEST/REMOVE_SUB/PURGE: (op, key, upto_seq, target_files)
#: ADD_SUB: (op, key, record_dict)
#: ADD_DUPID: (op, address, seq, id_bytes); REMOVE_DUPID: (op, address, seq)
Op = tuple[Any, ...]


_KEY_HEADS: dict[tuple[int, str], bytes] = {}


class BatchEncoder:
    """Builds one batch payload and, alongside, the op tuples the index applies.

    The same tuples come out of `parse_batch` on recovery, so the live path and
    replay share one `StoreIndex.apply` and cannot drift apart.
    """

    __slots__ = ("parts", "pos", "ops", "checksum")

    def __init__(self, checksum: bool = True) -> None:
        self.parts: list[bytes] = []
        self.pos = 0
        self.ops: list[Op] = []
        self.checksum = checksum

    def _key(self, code: int, key: str) -> None:
        head = _KEY_HEADS.get((code, key))
        if head is None:  # the op code and key, encoded once per destination
            kb = key.encode()
            head = _OPKEY.pack(code, len(kb)) + kb
            if len(_KEY_HEADS) >= 4096:
                _KEY_HEADS.clear()
            _KEY_HEADS[(code, key)] = head
        self.parts.append(head)
        self.pos += len(head)

    def message(self, code: int, key: str, seq: int, data: bytes) -> int:
        """ADD or MOVE `data`; returns the payload offset of the message bytes."""
        self._key(code, key)
        crc = crc32(data) if self.checksum else 0
        self.parts.append(_MSG.pack(seq, crc, len(data)))
        self.parts.append(data)
        rel = self.pos + 16
        self.pos = rel + len(data)
        self.ops.append((code, key, seq, rel, len(data)))
        return rel

    def ref(self, key: str, seq: int, rel: int, length: int) -> None:
        """Store `key`/`seq` as another name for the message at payload offset `rel`."""
        self._key(OP_REF, key)
        self.parts.append(_MSG.pack(seq, rel, length))
        self.pos += 16
        self.ops.append((OP_REF, key, seq, rel, length))

    def remove(self, code: int, key: str, seq: int, target: int) -> None:
        self._key(code, key)
        self.parts.append(_SEQ_FILE.pack(seq, target))
        self.pos += 12
        self.ops.append((code, key, seq, target))

    def remove_run(self, key: str, seqs: list[int], targets: list[int]) -> None:
        """REMOVE_RUN: every `seqs[i]` of `key` is gone (it lived in `targets[i]`)."""
        self._key(OP_REMOVE_RUN, key)
        self.parts.append(_U32.pack(len(seqs)))
        self.parts.append(_be_array("Q", seqs))
        self.parts.append(_be_array("I", targets))
        self.pos += 4 + 12 * len(seqs)
        self.ops.append((OP_REMOVE_RUN, key, seqs, targets))

    def add_dest(self, key: str) -> None:
        self._key(OP_ADD_DEST, key)
        self.ops.append((OP_ADD_DEST, key))

    def drop(self, code: int, key: str, upto: int, targets: tuple[int, ...]) -> None:
        """REMOVE_DEST, REMOVE_SUB or PURGE of everything of `key` up to `upto`."""
        targets = targets[:0xFFFF]
        self._key(code, key)
        self.parts.append(_UPTO.pack(upto, len(targets)))
        self.parts.append(struct.pack(f">{len(targets)}I", *targets))
        self.pos += 10 + 4 * len(targets)
        self.ops.append((code, key, upto, targets))

    def add_sub(self, key: str, record: dict[str, Any]) -> None:
        data = json.dumps(record, separators=(",", ":"), default=str).encode()
        self._key(OP_ADD_SUB, key)
        self.parts.append(_U32.pack(len(data)))
        self.parts.append(data)
        self.pos += 4 + len(data)
        self.ops.append((OP_ADD_SUB, key, record))

    def add_dup_id(self, address: str, seq: int, dup_id: bytes) -> None:
        dup_id = dup_id[:0xFFFF]
        self._key(OP_ADD_DUPID, address)
        self.parts.append(_DUPID.pack(seq, len(dup_id)))
        self.parts.append(dup_id)
        self.pos += 10 + len(dup_id)
        self.ops.append((OP_ADD_DUPID, address, seq, dup_id))

    def remove_dup_id(self, address: str, seq: int) -> None:
        self._key(OP_REMOVE_DUPID, address)
        self.parts.append(_U64.pack(seq))
        self.pos += 8
        self.ops.append((OP_REMOVE_DUPID, address, seq))

    def payload(self) -> bytes:
        return b"".join(self.parts)


def single_message(code: int, key: str, seq: int, data: bytes, checksum: bool = True
                   ) -> tuple[bytes, list[Op]]:
    """Payload and ops of a batch holding one ADD/MOVE: the common case, in one pack."""
    kb = key.encode()
    kl = len(kb)
    head = struct.pack(f">BH{kl}sQII", code, kl, kb, seq, crc32(data) if checksum else 0,
                       len(data))
    return head + data, [(code, key, seq, kl + 19, len(data))]


def _be_array(code: str, values: list[int]) -> bytes:
    a = array(code, values)
    if _SWAP:
        a.byteswap()
    return a.tobytes()


def _from_be(code: str, data: bytes) -> list[int]:
    a = array(code)
    a.frombytes(data)
    if _SWAP:
        a.byteswap()
    return a.tolist()


def single_remove(key: str, seq: int, target: int) -> tuple[bytes, list[Op]]:
    """Payload and ops of a batch holding one REMOVE (a single ack)."""
    kb = key.encode()
    kl = len(kb)
    return (struct.pack(f">BH{kl}sQI", OP_REMOVE, kl, kb, seq, target),
            [(OP_REMOVE, key, seq, target)])


def encode_state(dests: list[str], subs: dict[str, dict[str, Any]],
                 last_seq: dict[str, int],
                 dup_ids: dict[str, dict[int, bytes]] | None = None) -> bytes:
    state: dict[str, Any] = {"dests": dests, "subs": subs, "last_seq": last_seq}
    if dup_ids:
        state["dup_ids"] = dup_ids_json(dup_ids)
    return json.dumps(state, separators=(",", ":"), default=str).encode()


def dup_ids_json(dup_ids: dict[str, dict[int, bytes]]) -> dict[str, list[list[Any]]]:
    """Duplicate ids as JSON: address -> [[seq, hex id], ...]."""
    return {a: [[seq, i.hex()] for seq, i in ids.items()] for a, ids in dup_ids.items() if ids}


def dup_ids_from_json(raw: Any) -> dict[str, dict[int, bytes]]:
    if not isinstance(raw, dict):
        return {}
    return {str(a): {int(seq): bytes.fromhex(h) for seq, h in ids} for a, ids in raw.items()}


def parse_state(payload: bytes | memoryview) -> dict[str, Any]:
    try:
        state = json.loads(bytes(payload))
    except ValueError as exc:
        raise CorruptRecord(f"state record is not JSON: {exc}") from exc
    if not isinstance(state, dict):
        raise CorruptRecord("state record is not an object")
    return state


# ---------------------------------------------------------------------------
# Decoding (recovery, inspect, ack compaction)
# ---------------------------------------------------------------------------


def parse_batch(payload: bytes | memoryview, keys: dict[bytes, str] | None = None) -> list[Op]:
    """The op tuples of a batch payload, message offsets relative to the payload.

    `keys` interns key strings across records (recovery parses millions of ops
    naming a handful of keys).
    """
    if keys is None:
        keys = {}
    buf = payload
    end = len(buf)
    pos = 0
    ops: list[Op] = []
    unpack_opkey = _OPKEY.unpack_from
    unpack_msg = _MSG.unpack_from
    try:
        while pos < end:
            code, kl = unpack_opkey(buf, pos)
            pos += 3
            kb = bytes(buf[pos:pos + kl])
            key = keys.get(kb)
            if key is None:
                key = keys[kb] = kb.decode()
            pos += kl
            if code == OP_ADD or code == OP_MOVE:
                seq, _crc, ln = unpack_msg(buf, pos)
                pos += 16
                ops.append((code, key, seq, pos, ln))
                pos += ln
            elif code == OP_REF:
                seq, rel, ln = unpack_msg(buf, pos)
                pos += 16
                ops.append((code, key, seq, rel, ln))
            elif code == OP_REMOVE or code == OP_ACK_FWD:
                seq, target = _SEQ_FILE.unpack_from(buf, pos)
                pos += 12
                ops.append((code, key, seq, target))
            elif code == OP_REMOVE_RUN:
                (n,) = _U32.unpack_from(buf, pos)
                pos += 4
                if pos + 12 * n > end:
                    raise CorruptRecord("removal run overruns the record")
                run_seqs = _from_be("Q", bytes(buf[pos:pos + 8 * n]))
                pos += 8 * n
                run_files = _from_be("I", bytes(buf[pos:pos + 4 * n]))
                pos += 4 * n
                ops.append((code, key, run_seqs, run_files))
            elif code == OP_ADD_DEST:
                ops.append((code, key))
            elif code in (OP_REMOVE_DEST, OP_REMOVE_SUB, OP_PURGE):
                upto, n = _UPTO.unpack_from(buf, pos)
                pos += 10
                targets = struct.unpack_from(f">{n}I", buf, pos)
                pos += 4 * n
                ops.append((code, key, upto, targets))
            elif code == OP_ADD_SUB:
                (ln,) = _U32.unpack_from(buf, pos)
                pos += 4
                ops.append((code, key, json.loads(bytes(buf[pos:pos + ln]))))
                pos += ln
            elif code == OP_ADD_DUPID:
                seq, ln = _DUPID.unpack_from(buf, pos)
                pos += 10
                if pos + ln > end:
                    raise CorruptRecord("duplicate id overruns the record")
                ops.append((code, key, seq, bytes(buf[pos:pos + ln])))
                pos += ln
            elif code == OP_REMOVE_DUPID:
                (seq,) = _U64.unpack_from(buf, pos)
                pos += 8
                ops.append((code, key, seq))
            else:
                raise CorruptRecord(f"unknown operation code {code}")
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, CorruptRecord):
            raise
        raise CorruptRecord(f"unparsable batch at payload offset {pos}: {exc}") from exc
    if pos != end:
        raise CorruptRecord("batch operations overrun the record")
    return ops


# ---------------------------------------------------------------------------
# Scanning a data file
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class Damage:
    """A byte range of a data file that holds no valid record."""

    start: int
    end: int
    reason: str
    #: True when nothing valid follows: the torn tail of an interrupted write.
    tail: bool = False

    def __str__(self) -> str:
        kind = "torn tail" if self.tail else "damaged span"
        return f"{kind} at bytes {self.start}..{self.end} ({self.end - self.start} bytes: {self.reason})"


@dataclass(slots=True)
class ScanResult:
    """What `scan` found in one data file."""

    #: Offset just past the last valid record (where appends continue).
    end: int = FILE_HEADER_LEN
    damage: list[Damage] = field(default_factory=list)
    records: int = 0
    header_error: str | None = None


def _valid_at(buf: bytes | memoryview, size: int, file_id: int, pos: int) -> tuple[int, int] | str:
    """(type, payload length) of a valid record at `pos`, or why there is none."""
    if pos + REC_HEADER_LEN > size:
        return "truncated record header" if any(bytes(buf[pos:size])) else "zeros"
    magic, rtype, ln, crc = REC_HEADER.unpack_from(buf, pos)
    if magic != REC_MAGIC:
        return "no record header" if any(bytes(buf[pos:pos + REC_HEADER_LEN])) else "zeros"
    if rtype not in RECORD_TYPES:
        return f"unknown record type {rtype}"
    body = pos + REC_HEADER_LEN
    if body + ln > size:
        return "record runs past the end of the file"
    if crc32(buf[body:body + ln], crc32(_SEED.pack(file_id, pos, rtype, ln))) != crc:
        return "checksum mismatch"
    return rtype, ln


def validate_at(buf: Buffer, file_id: int, pos: int) -> tuple[int, int] | str:
    """(type, payload length) when a valid record starts at `pos`, else the reason."""
    mv = memoryview(buf)
    return _valid_at(mv, len(mv), file_id, pos)


def scan(buf: Buffer, file_id: int, start: int = FILE_HEADER_LEN,
         result: ScanResult | None = None) -> Iterator[tuple[int, int, memoryview]]:
    """Yield (offset, type, payload) for every valid record from `start`.

    Damage is recorded in `result` (pass one in to read it afterwards): after an
    invalid record the scan looks for the next record that validates at its own
    offset. If one is found the bytes between are a damaged span and scanning
    goes on; if none is, the rest is the end of the data (zeros after a clean end
    or in a preallocated file) or a torn tail (anything else).
    """
    res = result if result is not None else ScanResult()
    res.end = start
    mv = memoryview(buf)
    size = len(mv)
    pos = start
    if start <= FILE_HEADER_LEN:
        pos = start = FILE_HEADER_LEN
        res.end = start
        err = check_file_header(mv, file_id)
        if err is not None:
            res.header_error = err
    while pos < size:
        found = _valid_at(mv, size, file_id, pos)
        if isinstance(found, tuple):
            rtype, ln = found
            body = pos + REC_HEADER_LEN
            res.records += 1
            yield pos, rtype, mv[body:body + ln]
            pos = body + ln
            res.end = pos
            continue
        reason = found
        nxt = _resync(mv, size, file_id, pos + 1)
        if nxt is None:
            if reason != "zeros" or any(_chunks_nonzero(mv, pos, size)):
                res.damage.append(Damage(pos, size, reason, tail=True))
            break
        res.damage.append(Damage(pos, nxt, reason))
        pos = nxt


def _chunks_nonzero(mv: memoryview, start: int, end: int, chunk: int = 1 << 20) -> Iterator[bool]:
    for p in range(start, end, chunk):
        yield bool(bytes(mv[p:min(end, p + chunk)]).strip(b"\0"))


def _resync(mv: memoryview, size: int, file_id: int, pos: int) -> int | None:
    """Offset of the next record that validates at its own position, or None."""
    raw = mv.obj if hasattr(mv.obj, "find") else None  # bytes, bytearray, mmap
    while pos < size:
        nxt = raw.find(REC_MAGIC, pos, size) if raw is not None else _find(mv, REC_MAGIC, pos, size)
        if nxt < 0:
            return None
        if isinstance(_valid_at(mv, size, file_id, nxt), tuple):
            return nxt
        pos = nxt + 1
    return None


def _find(mv: memoryview, needle: bytes, pos: int, size: int, chunk: int = 4 << 20) -> int:
    """`find` over a memoryview (mmap) without copying the whole file at once."""
    while pos < size:
        end = min(size, pos + chunk + len(needle) - 1)
        i = bytes(mv[pos:end]).find(needle)
        if i >= 0:
            return pos + i
        pos += chunk
    return -1
