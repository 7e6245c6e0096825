"""Index checkpoints: a snapshot of the index tied to a journal position.

Recovery loads the newest checkpoint and replays only the journal written
after its position, so start-up time follows the journal since the last
checkpoint, not the size of the store. The format is a JSON header (keys,
subscriptions, sequence numbers, per-file bookkeeping) followed by each key's
raw columns and a crc32 of everything — no executable serialization, and a torn
or damaged checkpoint is detected and replaced by a rebuild from the journal.

A checkpoint is written to a temporary file, synced and renamed over the
previous one, so there is always one complete checkpoint (or none).

Loading a million-entry checkpoint is `array.frombytes` per column: tens of
milliseconds.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relaymq_kahadb.index import KeyIndex, StoreIndex
from relaymq_kahadb.journal.checksum import crc32
from relaymq_kahadb.journal.files import fsync_dir
from relaymq_kahadb.journal.records import dup_ids_from_json, dup_ids_json

MAGIC = b"RMQKIDX1"
VERSION = 1
NAME = "index.ckpt"
_U32 = struct.Struct("<I")
_COLUMNS = (("seqs", "q"), ("files", "I"), ("offsets", "I"), ("lengths", "I"))
_SWAP = sys.byteorder != "little"
#: duplicate ids serialised per `json.dumps` call when a header is built
_IDS_PER_SLICE = 2000


class CheckpointError(ValueError):
    """The checkpoint file is unusable; the index is rebuilt from the journal."""


@dataclass(slots=True)
class Snapshot:
    """A frozen copy of the index, taken on the loop, written by a thread."""

    position: tuple[int, int]
    #: the header's values, copied on the loop (the index's dicts keep changing);
    #: `header` serialises them in the writing thread
    meta: dict[str, Any]
    columns: list[bytes] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(len(c) for c in self.columns)

    @property
    def header(self) -> bytes:
        """The JSON header, built in the writing thread: with tens of thousands of
        duplicate ids it is megabytes and tens of milliseconds of work. The ids are
        serialised a slice at a time, so the event loop gets the GIL in between
        (one `json.dumps` call holds it until it returns)."""
        meta = {k: v for k, v in self.meta.items() if k != "dup_ids"}
        head = json.dumps(meta, separators=(",", ":"), default=str)
        parts = [head[:-1], ',"dup_ids":{']
        first = True
        for address, pairs in dup_ids_json(self.meta["dup_ids"]).items():
            if not first:
                parts.append(",")
            first = False
            parts.append(json.dumps(address))
            parts.append(":[")
            parts.append(",".join(json.dumps(pairs[i:i + _IDS_PER_SLICE], separators=(",", ":"))[1:-1]
                                  for i in range(0, len(pairs), _IDS_PER_SLICE)))
            parts.append("]")
        parts.append("}}")
        return "".join(parts).encode()


def snapshot(index: StoreIndex, position: tuple[int, int], files: dict[int, int],
             last_record: tuple[int, int] | None) -> Snapshot:
    """Copy the index (memcpy of the columns, copies of the dicts; no per-message
    Python work: the header is serialised by the thread that writes it)."""
    keys = []
    cols: list[bytes] = []
    for key, k in index.keys.items():
        h = k.head
        keys.append([key, len(k.seqs) - h])
        for name, _ in _COLUMNS:
            col = getattr(k, name)[h:]
            if _SWAP:
                col.byteswap()
            cols.append(col.tobytes())
    meta = {
        "version": VERSION,
        "position": list(position),
        "last_record": list(last_record) if last_record else None,
        "files": {str(f): n for f, n in files.items()},
        "dests": list(index.dests),
        "subs": dict(index.subs),  # records are replaced, never changed in place
        "last_seq": dict(index.last_seq),
        "keys": keys,
        "file_keys": {str(f): dict(fk) for f, fk in index.file_keys.items() if fk},
        "file_bytes": {str(f): b for f, b in index.file_bytes.items() if b},
        "ack_refs": {str(f): sorted(r) for f, r in index.ack_refs.items() if r},
        "dup_ids": {a: dict(ids) for a, ids in index.dup_ids.items() if ids},
        "created": time.time(),
    }
    return Snapshot(position, meta, cols)


def write(directory: Path, snap: Snapshot, sync: bool = True) -> int:
    """Write `snap` atomically (temp file, fsync, rename); returns its size. Blocking."""
    raw = snap.header
    path = directory / NAME
    tmp = directory / (NAME + ".tmp")
    crc = crc32(MAGIC)
    head = _U32.pack(len(raw))
    crc = crc32(head, crc)
    crc = crc32(raw, crc)
    size = len(MAGIC) + 4 + len(raw) + 4
    with open(tmp, "wb") as fh:
        fh.write(MAGIC)
        fh.write(head)
        fh.write(raw)
        for col in snap.columns:
            fh.write(col)
            crc = crc32(col, crc)
            size += len(col)
        fh.write(_U32.pack(crc))
        fh.flush()
        if sync:
            os.fsync(fh.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(directory)
    return size


@dataclass(slots=True)
class Loaded:
    index: StoreIndex
    position: tuple[int, int]
    files: dict[int, int]
    created: float
    last_record: tuple[int, int] | None = None


def load(directory: Path) -> Loaded | None:
    """The checkpoint in `directory`, None when there is none.

    :raises CheckpointError: when there is one but it cannot be used.
    """
    path = directory / NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from exc
    if len(data) < len(MAGIC) + 8 or data[:len(MAGIC)] != MAGIC:
        raise CheckpointError(f"{path} is not a RelayMQ KahaDB index checkpoint")
    (stored,) = _U32.unpack_from(data, len(data) - 4)
    if crc32(memoryview(data)[:-4]) != stored:
        raise CheckpointError(f"{path} is damaged (checksum mismatch)")
    pos = len(MAGIC)
    (hl,) = _U32.unpack_from(data, pos)
    pos += 4
    try:
        header = json.loads(data[pos:pos + hl])
    except ValueError as exc:
        raise CheckpointError(f"{path}: unreadable header: {exc}") from exc
    pos += hl
    if header.get("version") != VERSION:
        raise CheckpointError(f"{path}: version {header.get('version')} is not {VERSION}")
    index = StoreIndex()
    mv = memoryview(data)
    for key, n in header["keys"]:
        k = KeyIndex()
        for name, code in _COLUMNS:
            col = array(code)
            width = col.itemsize
            col.frombytes(mv[pos:pos + n * width])
            if _SWAP:
                col.byteswap()
            pos += n * width
            setattr(k, name, col)
        k.live = n - k.lengths.count(0)
        k.nbytes = sum(k.lengths)
        while k.head < n and not k.lengths[k.head]:
            k.head += 1
        index.keys[key] = k
    if pos != len(data) - 4:
        raise CheckpointError(f"{path}: columns do not match the header")
    index.dests = dict.fromkeys(header["dests"])
    index.subs = dict(header["subs"])
    index.last_seq = {k: int(v) for k, v in header["last_seq"].items()}
    index.file_keys = {int(f): dict(fk) for f, fk in header["file_keys"].items()}
    index.file_bytes = {int(f): int(b) for f, b in header["file_bytes"].items()}
    index.ack_refs = {int(f): set(r) for f, r in header["ack_refs"].items()}
    index.dup_ids = dup_ids_from_json(header.get("dup_ids", {}))
    position = (int(header["position"][0]), int(header["position"][1]))
    files = {int(f): int(n) for f, n in header["files"].items()}
    lr = header.get("last_record")
    last_record = (int(lr[0]), int(lr[1])) if lr else None
    return Loaded(index, position, files, float(header.get("created", 0)), last_record)
