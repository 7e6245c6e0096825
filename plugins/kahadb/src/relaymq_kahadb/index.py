"""The index: which messages are live, per destination and durable subscription.

Per key the index is four parallel `array`s — sequence, data file, offset and
length — 20 bytes per live message and no Python object per message, so a
backlog of millions of messages costs tens of MB while the message bytes stay
in the journal and are read on demand (`docs/kahadb.md` has the measurements
that chose this over SQLite). Sequences are appended in order (the kernel hands
them out increasing), so adding is an append and finding is a `bisect`; a
consumed message becomes a tombstone (length 0) and the dead prefix is trimmed
as a queue drains, so FIFO consumption stays O(1) amortised.

Alongside, per data file: the live entry count per key (what keeps a file
alive, shown by `kahadb inspect`) and live bytes, and the *ack references*:
the older files whose messages a file's removals refer to. A file may only be
deleted when those older files are gone too, or an index rebuild would
replay the old adds without the removals and bring consumed messages back.

`StoreIndex.apply` is the only code that changes the index, used both by the
live write path and by recovery, so a rebuilt index equals the live one.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any, Final

from relaymq_kahadb.journal.records import (
    NO_FILE,
    OP_ACK_FWD,
    OP_ADD,
    OP_ADD_DEST,
    OP_ADD_DUPID,
    OP_ADD_SUB,
    OP_MOVE,
    OP_PURGE,
    OP_REF,
    OP_REMOVE,
    OP_REMOVE_DEST,
    OP_REMOVE_DUPID,
    OP_REMOVE_RUN,
    OP_REMOVE_SUB,
    Op,
    dup_ids_from_json,
    dup_ids_json,
)

SUB_PREFIX: Final = "durable://"

Location = tuple[int, int, int]  # file id, offset of the message bytes, length


class KeyIndex:
    """The live messages of one key, in sequence order."""

    __slots__ = ("seqs", "files", "offsets", "lengths", "head", "live", "nbytes")

    def __init__(self) -> None:
        self.seqs = array("q")
        self.files = array("I")
        self.offsets = array("I")
        self.lengths = array("I")  # 0 = removed (tombstone)
        self.head = 0  # entries before head are all removed
        self.live = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return self.live

    def put(self, seq: int, f: int, off: int, ln: int) -> Location | None:
        """Add (or move) `seq` to a location; returns the location it replaced."""
        seqs = self.seqs
        if not seqs or seq > seqs[-1]:
            seqs.append(seq)
            self.files.append(f)
            self.offsets.append(off)
            self.lengths.append(ln)
            self.live += 1
            self.nbytes += ln
            return None
        i = bisect_left(seqs, seq, self.head)
        if i < len(seqs) and seqs[i] == seq:
            old_ln = self.lengths[i]
            old = (self.files[i], self.offsets[i], old_ln) if old_ln else None
            self.files[i] = f
            self.offsets[i] = off
            self.lengths[i] = ln
            if old is None:
                self.live += 1
            self.nbytes += ln - old_ln
            return old
        if i == self.head and self.head:
            self._trim()
            i = bisect_left(seqs, seq)
        seqs.insert(i, seq)
        self.files.insert(i, f)
        self.offsets.insert(i, off)
        self.lengths.insert(i, ln)
        self.live += 1
        self.nbytes += ln
        return None

    def _find(self, seq: int) -> int:
        """Position of `seq` at or after the head, or -1. Sequences of a key are
        usually consecutive (tombstones keep their places), so the position is
        first guessed from the head's sequence, then looked for by bisection."""
        seqs = self.seqs
        head = self.head
        n = len(seqs)
        if head < n:
            i = head + (seq - seqs[head])
            if head <= i < n and seqs[i] == seq:
                return i
        i = bisect_left(seqs, seq, head)
        if i < n and seqs[i] == seq:
            return i
        return -1

    def get(self, seq: int) -> Location | None:
        i = self._find(seq)
        if i >= 0:
            ln = self.lengths[i]
            if ln:
                return self.files[i], self.offsets[i], ln
        return None

    def file_of(self, seq: int) -> int:
        """The data file holding live `seq` (NO_FILE when it is not live)."""
        i = self._find(seq)
        if i >= 0 and self.lengths[i]:
            return self.files[i]
        return NO_FILE

    def remove(self, seq: int) -> Location | None:
        """Remove `seq`; returns where it was, or None when it was not live."""
        i = self._find(seq)
        if i < 0:
            return None
        ln = self.lengths[i]
        if not ln:
            return None
        loc = (self.files[i], self.offsets[i], ln)
        self._kill(i, ln)
        return loc

    def remove_run(self, seqs: list[int]) -> list[tuple[int, int, int]]:
        """Remove each of `seqs` that is live; returns (data file, entries, bytes)
        of what was removed, consecutive removals from one file counted together."""
        out: list[tuple[int, int, int]] = []
        last = -1
        count = 0
        nbytes = 0
        for seq in seqs:
            i = self._find(seq)
            if i < 0:
                continue
            ln = self.lengths[i]
            if not ln:
                continue
            f = self.files[i]
            self._kill(i, ln)
            if f != last:
                if count:
                    out.append((last, count, nbytes))
                last = f
                count = 0
                nbytes = 0
            count += 1
            nbytes += ln
        if count:
            out.append((last, count, nbytes))
        return out

    def _kill(self, i: int, ln: int) -> None:
        """Make live entry `i` (of length `ln`) a tombstone."""
        lengths = self.lengths
        lengths[i] = 0
        self.live -= 1
        self.nbytes -= ln
        n = len(lengths)
        head = self.head
        if i == head:
            head += 1
            while head < n and not lengths[head]:
                head += 1
            self.head = head
            if head > 4096 and head * 2 > n:
                self._trim()
        elif n - head - self.live > max(4096, 2 * self.live):
            self._compact()

    def drop_upto(self, upto: int) -> list[tuple[int, int]]:
        """Remove every live entry with seq <= upto; returns their (file, length)."""
        out: list[tuple[int, int]] = []
        seqs, files, lengths = self.seqs, self.files, self.lengths
        end = bisect_right(seqs, upto, self.head)
        for i in range(self.head, end):
            ln = lengths[i]
            if ln:
                out.append((files[i], ln))
                lengths[i] = 0
                self.nbytes -= ln
                self.live -= 1
        self.head = max(self.head, end)
        while self.head < len(seqs) and not lengths[self.head]:
            self.head += 1
        self._trim()
        return out

    def read(self, after: int, limit: int | None) -> list[tuple[int, int, int, int]]:
        """(seq, file, offset, length) of live entries with seq > after, in order."""
        seqs, files, offsets, lengths = self.seqs, self.files, self.offsets, self.lengths
        i = bisect_right(seqs, after, self.head)
        n = len(seqs)
        if limit is None:
            limit = n
        out: list[tuple[int, int, int, int]] = []
        while i < n and len(out) < limit:
            ln = lengths[i]
            if ln:
                out.append((seqs[i], files[i], offsets[i], ln))
            i += 1
        return out

    def entries_in_file(self, f: int) -> list[tuple[int, int, int]]:
        """(seq, offset, length) of the live entries stored in data file `f`."""
        raw = self.files.tobytes()
        needle = array("I", [f]).tobytes()
        width = self.files.itemsize
        out: list[tuple[int, int, int]] = []
        pos = self.head * width
        while True:
            i = raw.find(needle, pos)
            if i < 0:
                return out
            if i % width:
                pos = i + 1
                continue
            k = i // width
            ln = self.lengths[k]
            if ln:
                out.append((self.seqs[k], self.offsets[k], ln))
            pos = i + width

    def files_used(self) -> set[int]:
        lengths = self.lengths
        return {f for k, f in enumerate(self.files) if k >= self.head and lengths[k]}

    def first_last(self) -> tuple[int, int]:
        """Lowest and highest live sequence (0, 0 when empty)."""
        if not self.live:
            return 0, 0
        lo = self.seqs[self.head]
        i = len(self.seqs) - 1
        while not self.lengths[i]:
            i -= 1
        return lo, self.seqs[i]

    def _trim(self) -> None:
        h = self.head
        if h:
            del self.seqs[:h]
            del self.files[:h]
            del self.offsets[:h]
            del self.lengths[:h]
            self.head = 0

    def _compact(self) -> None:
        """Drop tombstones (random-order acks leave holes behind the head)."""
        keep = [k for k in range(self.head, len(self.seqs)) if self.lengths[k]]
        self.seqs = array("q", (self.seqs[k] for k in keep))
        self.files = array("I", (self.files[k] for k in keep))
        self.offsets = array("I", (self.offsets[k] for k in keep))
        self.lengths = array("I", (self.lengths[k] for k in keep))
        self.head = 0


class StoreIndex:
    """Everything the store knows without reading message bytes."""

    def __init__(self) -> None:
        self.keys: dict[str, KeyIndex] = {}
        self.dests: dict[str, None] = {}  # an ordered set
        self.subs: dict[str, dict[str, Any]] = {}  # key -> subscription record (JSON-able)
        self.last_seq: dict[str, int] = {}
        self.file_keys: dict[int, dict[str, int]] = {}  # file -> key -> live entries
        self.file_bytes: dict[int, int] = {}  # file -> live message bytes
        self.ack_refs: dict[int, set[int]] = {}  # file -> older files its removals point into
        #: duplicate-detection ids: address -> seq -> id. Like subscriptions they live in
        #: the index (checkpoints, STATE records), not in files the cleaner looks at.
        self.dup_ids: dict[str, dict[int, bytes]] = {}
        #: Operations applied since the index was last snapshotted (0 = clean).
        self.changes = 0

    # -- queries ------------------------------------------------------------

    def live_in_file(self, f: int) -> int:
        fk = self.file_keys.get(f)
        return sum(fk.values()) if fk else 0

    def location(self, key: str, seq: int) -> Location | None:
        k = self.keys.get(key)
        return k.get(seq) if k is not None else None

    def live_entries(self) -> int:
        return sum(k.live for k in self.keys.values())

    def live_bytes(self) -> int:
        return sum(k.nbytes for k in self.keys.values())

    # -- changes ------------------------------------------------------------

    def apply(self, ops: Iterable[Op], file_id: int, base: int) -> None:
        """Apply one record's operations; `base` is the file offset of its payload."""
        keys = self.keys
        last_seq = self.last_seq
        file_keys = self.file_keys
        file_bytes = self.file_bytes
        n = 0
        for op in ops:
            n += 1
            code = op[0]
            key = op[1]
            if code == OP_ADD or code == OP_REF or code == OP_MOVE:
                _, _, seq, rel, ln = op
                k = keys.get(key)
                if k is None:
                    k = keys[key] = KeyIndex()
                    if key not in self.dests and not key.startswith(SUB_PREFIX):
                        self.dests[key] = None
                old = k.put(seq, file_id, base + rel, ln)
                fk = file_keys.get(file_id)
                if fk is None:
                    fk = file_keys[file_id] = {}
                fk[key] = fk.get(key, 0) + 1
                file_bytes[file_id] = file_bytes.get(file_id, 0) + ln
                if old is not None:
                    self._unaccount(key, old[0], old[2])
                if seq > last_seq.get(key, 0):
                    last_seq[key] = seq
            elif code == OP_REMOVE or code == OP_ACK_FWD:
                k = keys.get(key)
                loc = k.remove(op[2]) if k is not None else None
                if loc is not None:
                    self._unaccount(key, loc[0], loc[2])
                    target = loc[0]
                else:
                    target = op[3] if code == OP_ACK_FWD else NO_FILE
                if target != NO_FILE and target != file_id:
                    refs = self.ack_refs.get(file_id)
                    if refs is None:
                        refs = self.ack_refs[file_id] = set()
                    refs.add(target)
            elif code == OP_REMOVE_RUN:
                k = keys.get(key)
                if k is not None:
                    for f, count, nbytes in k.remove_run(op[2]):
                        self._unaccount_many(key, f, count, nbytes)
                        if f != file_id:
                            refs = self.ack_refs.get(file_id)
                            if refs is None:
                                refs = self.ack_refs[file_id] = set()
                            refs.add(f)
            elif code == OP_ADD_DEST:
                self.dests[key] = None
                if key not in keys:
                    keys[key] = KeyIndex()
            elif code == OP_REMOVE_DEST or code == OP_REMOVE_SUB or code == OP_PURGE:
                _, _, upto, targets = op
                k = keys.get(key)
                if k is not None:
                    for f, ln in k.drop_upto(upto):
                        self._unaccount(key, f, ln)
                    if not k.live and code != OP_PURGE:
                        del keys[key]
                if code == OP_REMOVE_DEST:
                    self.dests.pop(key, None)
                elif code == OP_REMOVE_SUB:
                    self.subs.pop(key, None)
                refs = {t for t in targets if t != file_id}
                if refs:
                    self.ack_refs.setdefault(file_id, set()).update(refs)
            elif code == OP_ADD_SUB:
                self.subs[key] = op[2]
                if key not in keys:
                    keys[key] = KeyIndex()
            elif code == OP_ADD_DUPID:
                ids = self.dup_ids.get(key)
                if ids is None:
                    ids = self.dup_ids[key] = {}
                ids[op[2]] = op[3]
            elif code == OP_REMOVE_DUPID:
                ids = self.dup_ids.get(key)
                if ids is not None:
                    ids.pop(op[2], None)
                    if not ids:
                        del self.dup_ids[key]
            else:  # pragma: no cover - records.parse_batch rejects unknown codes
                raise ValueError(f"unknown operation {op!r}")
        self.changes += n

    def apply_state(self, state: dict[str, Any]) -> None:
        """A STATE record: the destinations and subscriptions that exist from here on."""
        self.dests = dict.fromkeys(state.get("dests", []))
        self.subs = dict(state.get("subs", {}))
        for key, seq in state.get("last_seq", {}).items():
            if seq > self.last_seq.get(key, 0):
                self.last_seq[key] = seq
        for key in list(self.dests) + list(self.subs):
            self.keys.setdefault(key, KeyIndex())
        self.dup_ids = dup_ids_from_json(state.get("dup_ids", {}))
        self.changes += 1

    def state(self) -> dict[str, Any]:
        return {"dests": list(self.dests), "subs": dict(self.subs),
                "last_seq": dict(self.last_seq), "dup_ids": dup_ids_json(self.dup_ids)}

    def forget_file(self, f: int) -> None:
        """A data file was deleted: drop its bookkeeping (it must hold nothing live)."""
        self.file_keys.pop(f, None)
        self.file_bytes.pop(f, None)
        self.ack_refs.pop(f, None)

    def drop_entries_in(self, f: int) -> list[tuple[str, int]]:
        """Remove every entry stored in file `f` (it is lost); returns (key, seq) pairs."""
        lost = []
        for key in list(self.file_keys.get(f, {})):
            k = self.keys.get(key)
            if k is None:
                continue
            for seq, _off, _ln in k.entries_in_file(f):
                k.remove(seq)
                lost.append((key, seq))
        self.file_keys.pop(f, None)
        self.file_bytes.pop(f, None)
        self.changes += 1
        return lost

    def drop_entries_between(self, f: int, start: int, end: int) -> list[tuple[str, int]]:
        """Remove the entries whose bytes lie in `f` between `start` and `end` (damage)."""
        lost = []
        for key in list(self.file_keys.get(f, {})):
            k = self.keys[key]
            for seq, off, ln in k.entries_in_file(f):
                if off + ln > start and off < end:
                    k.remove(seq)
                    self._unaccount(key, f, ln)
                    lost.append((key, seq))
        self.changes += 1
        return lost

    def _unaccount(self, key: str, f: int, ln: int) -> None:
        self._unaccount_many(key, f, 1, ln)

    def _unaccount_many(self, key: str, f: int, count: int, nbytes: int) -> None:
        fk = self.file_keys.get(f)
        if fk is not None:
            c = fk.get(key, 0) - count
            if c > 0:
                fk[key] = c
            else:
                fk.pop(key, None)
        b = self.file_bytes.get(f, 0) - nbytes
        self.file_bytes[f] = b if b > 0 else 0
