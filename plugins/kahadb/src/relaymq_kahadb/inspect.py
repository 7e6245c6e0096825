"""`relaymq kahadb inspect DIR`: explain every data file and why it is still there.

KahaDB users mostly ask one question: "why is my store 40 GB when my queues are
empty?". This answers it per data file — its size, what is live in it and
*which destination or subscription keeps it alive*, or which older files its
acks point into (the ack pin) — plus what the cleaner will do about it.

It works on a copy of the state in memory (checkpoint + journal replay, the
same code as start-up recovery) and never writes: no truncation, no
quarantine, no lock taken. On a running broker's directory it shows a snapshot.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from relaymq_kahadb import checkpoint
from relaymq_kahadb.config import KahaDBConfig
from relaymq_kahadb.journal.files import list_data_files
from relaymq_kahadb.journal.records import (
    OP_NAMES,
    RT_BATCH,
    RT_STATE,
    ScanResult,
    parse_batch,
    scan,
)
from relaymq_kahadb.lock import DirectoryLock
from relaymq_kahadb.recovery import recover


@dataclass(slots=True)
class FileReport:
    file: int
    name: str
    disk_bytes: int  # the file's size on disk (preallocated space included)
    data_bytes: int  # bytes of records
    records: int | None = None
    ops: dict[str, int] = field(default_factory=dict)
    damage: list[str] = field(default_factory=list)
    live_messages: int = 0
    live_bytes: int = 0
    kept_by: list[tuple[str, int]] = field(default_factory=list)  # key, live messages
    pins: list[int] = field(default_factory=list)  # older present files its acks refer to
    pinned_by: list[int] = field(default_factory=list)
    status: str = ""


@dataclass(slots=True)
class KeyReport:
    key: str
    kind: str  # destination | subscription
    messages: int
    bytes: int
    first_seq: int
    last_live_seq: int
    last_seq: int
    files: list[int]
    record: dict[str, Any] | None = None


@dataclass(slots=True)
class StoreReport:
    directory: str
    locked_by: str | None
    checkpoint: str
    recovery: str
    files: list[FileReport]
    keys: list[KeyReport]
    disk_bytes: int
    data_bytes: int
    live_bytes: int
    live_messages: int
    missing_files: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class NotAKahaDBDirectory(ValueError):
    """The directory holds no KahaDB store (nothing to explain)."""


def not_a_store(directory: Path, index_dir: Path | None = None) -> str:
    """Why `directory` is not a KahaDB store directory ('' when it is one).

    A store that was ever started has a `lock` and a `db-1.log`; an index
    checkpoint or a `quarantine/` folder also count (a store whose data files
    were lost is still worth explaining).
    """
    if not directory.is_dir():
        return f"{directory} is not a directory"
    if (list_data_files(directory) or (directory / "lock").exists()
            or (directory / "quarantine").is_dir()
            or ((index_dir or directory) / checkpoint.NAME).exists()):
        return ""
    hint = ""
    for sub in ("kahadb", "KahaDB"):
        if list_data_files(directory / sub):
            hint = f"; did you mean {directory / sub}?"
            break
    else:
        hint = ("; it is the directory=\"...\" of <kahaDB> in activemq.xml, by default "
                "<dataDirectory>/kahadb")
    return (f"{directory} is not a KahaDB store directory: it has no data files "
            f"(db-<n>.log), no index checkpoint ({checkpoint.NAME}) and no lock file{hint}")


def inspect_store(directory: Path, *, index_dir: Path | None = None, scan_records: bool = True,
                  config: KahaDBConfig | None = None) -> StoreReport:
    problem = not_a_store(directory, index_dir)
    if problem:
        raise NotAKahaDBDirectory(problem)
    # Report missing files instead of refusing, as the broker would.
    cfg = config or KahaDBConfig(directory=str(directory), ignore_missing_journalfiles=True)
    index_dir = index_dir or directory
    lock = DirectoryLock(directory)
    locked_by = None
    if (directory / "lock").exists():
        if lock.try_acquire():
            lock.release()
        else:
            locked_by = lock.holder()
    ckpt_note = _checkpoint_note(index_dir)
    quiet = logging.getLogger("relaymq.kahadb.recovery")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # findings are reported below, not logged
    try:
        rec = recover(directory, index_dir, cfg, read_only=True)
    finally:
        quiet.setLevel(level)
    idx = rec.index
    on_disk = list_data_files(directory)
    last = max(on_disk) if on_disk else None
    ckpt_file = rec.checkpoint_position[0] if rec.checkpoint_position else None
    present = set(on_disk)
    pinned_by: dict[int, list[int]] = {}
    for f, refs in idx.ack_refs.items():
        for r in refs:
            if r in present and r != f:
                pinned_by.setdefault(r, []).append(f)
    damage_by_file: dict[int, list[str]] = {}
    for f, d in rec.report.lost_spans:
        damage_by_file.setdefault(f, []).append(str(d))
    for f, off, n in rec.report.truncated:
        damage_by_file.setdefault(f, []).append(f"torn tail at {off} ({n} bytes), cut at start-up")

    files = []
    for f, path in on_disk.items():
        st = path.stat()
        fr = FileReport(f, path.name, st.st_size, rec.files.get(f, st.st_size))
        if scan_records:
            fr.records, fr.ops, scan_damage = _count(path, f)
            fr.damage = damage_by_file.get(f, scan_damage)
        else:
            fr.damage = damage_by_file.get(f, [])
        fk = idx.file_keys.get(f) or {}
        fr.live_messages = sum(fk.values())
        fr.live_bytes = idx.file_bytes.get(f, 0)
        fr.kept_by = sorted(fk.items(), key=lambda kv: (-kv[1], kv[0]))
        fr.pins = sorted(r for r in idx.ack_refs.get(f, ()) if r in present and r != f)
        fr.pinned_by = sorted(pinned_by.get(f, []))
        fr.status = _status(fr, last, ckpt_file, cfg)
        files.append(fr)

    keys = []
    for key, k in sorted(idx.keys.items()):
        kind = "subscription" if key in idx.subs else "destination"
        if kind == "destination" and key not in idx.dests and not k.live:
            continue
        lo, hi = k.first_last()
        keys.append(KeyReport(key, kind, k.live, k.nbytes, lo, hi, idx.last_seq.get(key, 0),
                              sorted(k.files_used()), idx.subs.get(key)))
    return StoreReport(
        directory=str(directory), locked_by=locked_by, checkpoint=ckpt_note,
        recovery=rec.report.summary(), files=files, keys=keys,
        disk_bytes=sum(fr.disk_bytes for fr in files),
        data_bytes=sum(fr.data_bytes for fr in files),
        live_bytes=idx.live_bytes(), live_messages=idx.live_entries(),
        missing_files=rec.report.missing_files)


def _checkpoint_note(index_dir: Path) -> str:
    try:
        loaded = checkpoint.load(index_dir)
    except checkpoint.CheckpointError as exc:
        return f"unusable ({exc}); the broker will rebuild the index from the journal"
    if loaded is None:
        return "none; the broker will rebuild the index from the journal"
    f, off = loaded.position
    return f"covers the journal up to db-{f}.log:{off}"


def _count(path: Path, f: int) -> tuple[int, dict[str, int], list[str]]:
    ops: Counter[str] = Counter()
    res = ScanResult()
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return 0, {}, ["empty file"]
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            keys: dict[bytes, str] = {}
            for _off, rtype, payload in scan(mm, f, result=res):
                if rtype == RT_BATCH:
                    try:
                        for op in parse_batch(payload, keys):
                            ops[OP_NAMES[op[0]]] += 1
                    except ValueError:
                        ops["unparsable batch"] += 1
                elif rtype == RT_STATE:
                    ops["state"] += 1
            payload = memoryview(b"")  # noqa: F841 - release the view before the map closes
    return res.records, dict(ops), [str(d) for d in res.damage]


def _status(fr: FileReport, last: int | None, ckpt_file: int | None, cfg: KahaDBConfig) -> str:
    if fr.file == last:
        return "the tail: being written"
    live = fr.live_messages
    if ckpt_file is None or fr.file >= ckpt_file:
        head = "after the last checkpoint: kept until the next checkpoint covers it"
        return head + (f"; {live} live message(s)" if live else "")
    if live:
        pct = 100.0 * fr.live_bytes / max(fr.data_bytes, 1)
        who = ", ".join(f"{k} ({n})" for k, n in fr.kept_by[:5])
        more = f" and {len(fr.kept_by) - 5} more" if len(fr.kept_by) > 5 else ""
        text = f"kept alive by {live} live message(s), {pct:.1f}% of its bytes: {who}{more}"
        if pct < 100 * cfg.compaction_threshold:
            text += (f"; a compaction candidate: its live messages move forward once it is "
                     f"unchanged for compactAcksAfterNoGC={cfg.compact_acks_after_no_gc} cleanups")
        return text
    if fr.pins:
        return (f"nothing live, but kept by acks: its removals refer to messages in "
                f"{_names(fr.pins)}, which are still present (ack compaction forwards them "
                f"after compactAcksAfterNoGC={cfg.compact_acks_after_no_gc} cleanups)")
    return "nothing live: deleted at the next cleanup"


def _names(files: list[int]) -> str:
    return ", ".join(f"db-{f}.log" for f in files)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n} B"


def format_report(rep: StoreReport) -> str:
    out = [f"KahaDB store {rep.directory}"]
    out.append(f"  lock: {'held by ' + rep.locked_by + ' (a snapshot of a running store)' if rep.locked_by else 'free'}")
    out.append(f"  checkpoint: {rep.checkpoint}")
    out.append(f"  recovery: {rep.recovery}")
    out.append(f"  data files: {len(rep.files)}, {_mb(rep.data_bytes)} of records "
               f"({_mb(rep.disk_bytes)} on disk); live: {rep.live_messages} message(s), "
               f"{_mb(rep.live_bytes)}")
    for f in rep.missing_files:
        out.append(f"  MISSING: db-{f}.log held live messages and is gone")
    out.append("")
    for fr in rep.files:
        recs = f", {fr.records} records" if fr.records is not None else ""
        ops = (" (" + ", ".join(f"{n} {k}" for k, n in sorted(fr.ops.items())) + ")") if fr.ops else ""
        out.append(f"{fr.name}: {_mb(fr.data_bytes)}{recs}{ops}")
        out.append(f"    {fr.status}")
        if fr.pinned_by:
            out.append(f"    acks in {_names(fr.pinned_by)} refer to it")
        for d in fr.damage:
            out.append(f"    damage: {d}")
    out.append("")
    out.append("destinations and subscriptions:")
    if not rep.keys:
        out.append("  (none)")
    for k in rep.keys:
        where = f" in {_names(k.files)}" if k.files else ""
        rng = f", seq {k.first_seq}..{k.last_live_seq}" if k.messages else ""
        line = (f"  {k.key} [{k.kind}]: {k.messages} message(s), {_mb(k.bytes)}{rng}, "
                f"last seq {k.last_seq}{where}")
        out.append(line)
        if k.record:
            sel = k.record.get("selector")
            out.append(f"      topic {k.record.get('topic')}" + (f", selector {sel!r}" if sel else ""))
    return "\n".join(out)
