"""What can be read out of a damaged record, and exactly what it lost.

A record's checksum covers its whole payload, so one damaged byte invalidates
it; but one batch record can hold hundreds of messages (a loop turn's sends),
each with its own crc32. When a damaged span starts with an intact record
header whose length reaches no further than the span, recovery walks the
payload operation by operation instead of dropping it whole:

* an ADD or MOVE whose message bytes match their own crc32, on a key the store
  already knows (or one the same record creates), with a plausible sequence,
  is kept: the message was acknowledged as durable and its bytes are intact;
* REFs to a kept message are kept;
* removals (acks, unsubscribes, purges) are *not* applied — their few bytes are
  not checksummed on their own, and a wrong removal would lose a message; a
  skipped ack at worst redelivers one. They are reported;
* everything else in the record — messages that fail their crc32, operations
  after the walk lost its footing — is reported as lost, by key and sequence
  when it could still be read.

Only records after the index checkpoint are walked (before it, the index
already says which messages lived in the damaged bytes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from relaymq_kahadb.index import SUB_PREFIX, StoreIndex
from relaymq_kahadb.journal.checksum import crc32
from relaymq_kahadb.journal.records import (
    OP_ACK_FWD,
    OP_ADD,
    OP_ADD_DEST,
    OP_ADD_DUPID,
    OP_ADD_SUB,
    OP_MOVE,
    OP_NAMES,
    OP_PURGE,
    OP_REF,
    OP_REMOVE,
    OP_REMOVE_DEST,
    OP_REMOVE_DUPID,
    OP_REMOVE_RUN,
    OP_REMOVE_SUB,
    REC_HEADER,
    REC_HEADER_LEN,
    REC_MAGIC,
    RT_BATCH,
    Buffer,
    Op,
)

_OPKEY = struct.Struct(">BH")
_MSG = struct.Struct(">QII")
_SEQ_FILE = struct.Struct(">QI")
_UPTO = struct.Struct(">QH")
_U32 = struct.Struct(">I")
_DUPID = struct.Struct(">QH")
#: Largest plausible jump of a destination's sequence within one record.
_SEQ_SLACK = 1 << 24


@dataclass(slots=True)
class Salvage:
    """What one damaged span gave back and what it lost."""

    kept: int = 0  # messages (ADD/MOVE/REF) put back into the index
    lost: list[tuple[str, int]] = field(default_factory=list)  # messages that failed their crc
    skipped: list[str] = field(default_factory=list)  # removals etc. not applied, described
    unreadable: int = 0  # bytes of the span no operation could be read from
    maybe: list[str] = field(default_factory=list)  # sequence gaps around unreadable bytes
    records: int = 0  # damaged records walked

    def describe(self) -> str:
        parts = []
        if self.records:
            parts.append(f"{self.records} damaged record(s) read operation by operation: "
                         f"{self.kept} intact stored message(s) kept")
        if self.lost:
            parts.append(describe_lost(self.lost))
        if self.skipped:
            more = f" (+{len(self.skipped) - 20} more)" if len(self.skipped) > 20 else ""
            parts.append(f"not applied (unverifiable; possible redeliveries): "
                         f"{'; '.join(self.skipped[:20])}{more}")
        if self.unreadable:
            parts.append(f"{self.unreadable} byte(s) unreadable: any sends or acks written "
                         f"there after the last checkpoint are lost (possible lost messages "
                         f"or redeliveries)")
        if self.maybe:
            parts.append(f"sequences missing around the unreadable bytes (lost if they were "
                         f"persistent messages): {', '.join(self.maybe)}")
        return ". ".join(parts) if parts else "nothing lost"


def salvage_span(buf: Buffer, file_id: int, start: int, end: int, index: StoreIndex
                 ) -> Salvage:
    """Walk the damaged records in `buf[start:end]`, applying what is intact to
    `index` (in journal order, as replay would have) and describing the rest."""
    out = Salvage()
    mv = memoryview(buf)
    pos = start
    while pos + REC_HEADER_LEN <= end:
        magic, rtype, ln, _crc = REC_HEADER.unpack_from(mv, pos)
        body = pos + REC_HEADER_LEN
        if magic != REC_MAGIC or rtype != RT_BATCH or body + ln > end:
            break
        out.records += 1
        ops = _walk(mv[body:body + ln], index, out)
        if ops:
            index.apply(ops, file_id, body)
        pos = body + ln
    out.unreadable += end - pos
    return out


def _walk(payload: memoryview, index: StoreIndex, out: Salvage) -> list[Op]:
    """The verifiable operations of one damaged batch payload; the rest into `out`.

    When an operation cannot be read (its header is in the damaged bytes), the
    walk looks for the next ADD of a key seen in the record (or known to the
    store) whose message matches its crc32 and goes on from there.
    """
    w = _Walk(payload, index, out)
    pos = 0
    while pos < w.end:
        nxt = w.op(pos)
        if nxt is None:
            nxt = w.resync(pos + 1)
            out.unreadable += nxt - pos
        pos = nxt
    w.report_gaps()
    return w.ops


class _Walk:
    def __init__(self, payload: memoryview, index: StoreIndex, out: Salvage) -> None:
        self.p = payload
        self.raw = bytes(payload)
        self.end = len(payload)
        self.index = index
        self.out = out
        self.ops: list[Op] = []
        self.created: set[str] = set()
        self.kept_at: set[int] = set()
        self.seen: dict[str, list[int]] = {}  # key -> sequences read (kept or not)

    def known(self, key: str) -> bool:
        i = self.index
        return key in i.keys or key in i.dests or key in i.subs or key in self.created

    def op(self, pos: int) -> int | None:
        """Read the operation at `pos`; the position after it, or None if unreadable."""
        p, out = self.p, self.out
        try:
            code, kl = _OPKEY.unpack_from(p, pos)
            at = pos + 3
            key = self.raw[at:at + kl].decode()
            at += kl
            if not _plausible_key(key):
                return None
            known = self.known(key)
            if code in (OP_ADD, OP_MOVE):
                seq, crc, ln = _MSG.unpack_from(p, at)
                at += 16
                intact = at + ln <= self.end and crc != 0 and crc32(p[at:at + ln]) == crc
                if not intact:
                    if at + ln > self.end or (at + ln < self.end and not self._head_at(at + ln)):
                        # its length cannot be trusted either: find the next operation
                        out.lost.append((key, seq))
                        self.seen.setdefault(key, []).append(seq)
                        return None
                last = self.index.last_seq.get(key, 0)
                self.seen.setdefault(key, []).append(seq)
                if intact and known and (code == OP_MOVE or last < seq <= last + _SEQ_SLACK):
                    self.ops.append((code, key, seq, at, ln))
                    self.kept_at.add(at)
                    out.kept += 1
                else:
                    out.lost.append((key, seq))
                return at + ln
            if code == OP_REF:
                seq, rel, ln = _MSG.unpack_from(p, at)
                if known and rel in self.kept_at:
                    self.ops.append((code, key, seq, rel, ln))
                    out.kept += 1
                else:
                    out.lost.append((key, seq))
                return at + 16
            if code in (OP_REMOVE, OP_ACK_FWD):
                seq, _target = _SEQ_FILE.unpack_from(p, at)
                out.skipped.append(f"ack of {key} seq {seq}")
                return at + 12
            if code == OP_REMOVE_RUN:
                (n,) = _U32.unpack_from(p, at)
                if at + 4 + 12 * n > self.end:
                    return None
                out.skipped.append(f"{n} ack(s) of {key}")
                return at + 4 + 12 * n
            if code == OP_ADD_DEST:
                self.ops.append((code, key))
                self.created.add(key)
                return at
            if code in (OP_REMOVE_DEST, OP_REMOVE_SUB, OP_PURGE):
                upto, n = _UPTO.unpack_from(p, at)
                out.skipped.append(f"{OP_NAMES[code]} of {key} up to seq {upto}")
                return at + 10 + 4 * n
            if code == OP_ADD_SUB:
                (ln,) = _U32.unpack_from(p, at)
                out.skipped.append(f"add-sub {key}")
                return at + 4 + ln
            if code == OP_ADD_DUPID:  # an id without certainty its message survived: dropped
                seq, ln = _DUPID.unpack_from(p, at)
                out.skipped.append(f"duplicate id of {key} seq {seq}")
                return at + 10 + ln
            if code == OP_REMOVE_DUPID:
                out.skipped.append(f"removal of a duplicate id of {key}")
                return at + 8
        except (struct.error, UnicodeDecodeError):
            pass
        return None

    def _head_at(self, pos: int) -> bool:
        """Whether an operation on a plausible key starts at `pos`."""
        if pos + 3 > self.end:
            return False
        code, kl = _OPKEY.unpack_from(self.p, pos)
        if code not in OP_NAMES:
            return False
        try:
            return _plausible_key(self.raw[pos + 3:pos + 3 + kl].decode())
        except UnicodeDecodeError:
            return False

    def resync(self, pos: int) -> int:
        """The next position from `pos` where an intact ADD/MOVE starts (else the end)."""
        keys = list(self.seen) + [k for k in list(self.index.keys)[:256] if k not in self.seen]
        heads = [_OPKEY.pack(code, len(kb)) + kb
                 for kb in (k.encode() for k in keys) for code in (OP_ADD, OP_MOVE)]
        while pos < self.end:
            found = [i for i in (self.raw.find(h, pos) for h in heads) if i >= 0]
            if not found:
                return self.end
            cand = min(found)
            code, kl = _OPKEY.unpack_from(self.p, cand)
            at = cand + 3 + kl
            if at + 16 <= self.end:
                _seq, crc, ln = _MSG.unpack_from(self.p, at)
                at += 16
                if crc and at + ln <= self.end and crc32(self.p[at:at + ln]) == crc:
                    return cand
            pos = cand + 1
        return self.end

    def report_gaps(self) -> None:
        """Sequences missing between those read: they may have been in the unreadable
        bytes (or were never stored: non-persistent messages take sequences too)."""
        if not self.out.unreadable:
            return
        for key, seqs in sorted(self.seen.items()):
            seqs = sorted(set(seqs))
            for a, b in zip(seqs, seqs[1:], strict=False):
                if b > a + 1:
                    self.out.maybe.append(f"{key} seq {a + 1}" if b == a + 2
                                          else f"{key} seq {a + 1}-{b - 1}")


def _plausible_key(key: str) -> bool:
    scheme, sep, name = key.partition("://")
    return bool(sep and name and scheme.isalpha() and key.isprintable()) or key.startswith(SUB_PREFIX)


def describe_lost(lost: list[tuple[str, int]]) -> str:
    """'lost 3 stored messages: queue://A seq 4-5, 9; ...' (sequence ranges per key)."""
    by_key: dict[str, list[int]] = {}
    for key, seq in lost:
        by_key.setdefault(key, []).append(seq)
    parts = []
    for key, seqs in sorted(by_key.items()):
        seqs.sort()
        ranges: list[str] = []
        lo = prev = seqs[0]
        for s in seqs[1:] + [None]:  # type: ignore[list-item]
            if s is not None and s == prev + 1:
                prev = s
                continue
            ranges.append(str(lo) if lo == prev else f"{lo}-{prev}")
            if s is not None:
                lo = prev = s
        parts.append(f"{key} seq {', '.join(ranges)}")
    return f"lost {len(lost)} stored message(s): " + "; ".join(parts)
