"""Start-up recovery: checkpoint + journal replay, with damage handled in the open.

1. Load the index checkpoint (`index.ckpt`). If it is missing, damaged, does not
   match the journal, or `forceRecoverIndex` is set, rebuild the index from the
   first data file instead (logged with the reason and with progress).
2. Replay every record after the checkpoint's position, verifying checksums.
   `checkForCorruptJournalFiles` also verifies the files before it.
3. Damage:

   * a torn tail of the *last* file (an interrupted write: nothing valid after
     it) is cut off at the last good record; those records were never
     acknowledged as durable under ``always``;
   * anything else — a damaged span with valid records after it, a torn end of
     a file that was already rolled over, a bad file header — means the file
     is moved to ``quarantine/`` (never deleted). Its intact records are still
     used: the adapter copies their live messages forward into the journal
     right after start-up. What was lost is logged precisely: the byte ranges,
     and every stored message (key and sequence) whose bytes were in them.

4. Messages whose data file is missing altogether stop the start-up with the
   list of what is missing, unless `ignoreMissingJournalfiles` says to go on
   without them (as ActiveMQ).

Recovery runs in a worker thread; it reads each data file through `mmap`.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from relaymq_kahadb import checkpoint
from relaymq_kahadb.config import KahaDBConfig
from relaymq_kahadb.errors import MissingJournalFiles
from relaymq_kahadb.index import StoreIndex
from relaymq_kahadb.journal.files import fsync_dir, list_data_files, preallocate, remove_leftovers
from relaymq_kahadb.journal.records import (
    FILE_HEADER_LEN,
    REC_HEADER_LEN,
    RT_BATCH,
    RT_STATE,
    CorruptRecord,
    Damage,
    ScanResult,
    file_header,
    parse_batch,
    parse_state,
    scan,
    validate_at,
)
from relaymq_kahadb.salvage import Salvage, describe_lost, salvage_span

log = logging.getLogger("relaymq.kahadb.recovery")

QUARANTINE: Final = "quarantine"
_PROGRESS_EVERY = 2.0  # seconds between progress lines


@dataclass(slots=True)
class RecoveryReport:
    rebuilt: bool = False
    reason: str = ""
    replayed_records: int = 0
    replayed_bytes: int = 0
    seconds: float = 0.0
    truncated: list[tuple[int, int, int]] = field(default_factory=list)  # file, offset, bytes
    quarantined: list[tuple[int, str, list[Damage]]] = field(default_factory=list)
    lost: list[tuple[str, int]] = field(default_factory=list)  # (key, seq) known lost
    lost_spans: list[tuple[int, Damage]] = field(default_factory=list)
    missing_files: list[int] = field(default_factory=list)

    def summary(self) -> str:
        how = f"rebuilt from the journal ({self.reason})" if self.rebuilt else "from checkpoint"
        parts = [f"index {how}; replayed {self.replayed_records} records "
                 f"({self.replayed_bytes / 1e6:.1f} MB) in {self.seconds:.2f} s"]
        if self.truncated:
            parts.append(f"{len(self.truncated)} torn tail(s) cut")
        if self.quarantined:
            parts.append(f"{len(self.quarantined)} damaged file(s) quarantined")
        if self.lost:
            parts.append(f"{len(self.lost)} stored messages lost")
        return "; ".join(parts)


@dataclass(slots=True)
class Recovered:
    index: StoreIndex
    files: dict[int, int]  # data file id -> size, in the directory now
    tail: tuple[int, int]  # where appends continue
    last_record: tuple[int, int] | None  # start of the last valid record
    checkpoint_position: tuple[int, int] | None
    quarantined: dict[int, Path]  # file id -> quarantined path still holding live entries
    report: RecoveryReport


def recover(directory: Path, index_dir: Path, config: KahaDBConfig, *,
            read_only: bool = False) -> Recovered:
    """Rebuild the in-memory state of the store in `directory` (blocking)."""
    t0 = time.perf_counter()
    report = RecoveryReport()
    if not read_only:
        remove_leftovers(directory)
    files = list_data_files(directory)
    loaded = _load_checkpoint(index_dir, config, report, read_only)
    if loaded is not None:
        problem = _checkpoint_mismatch(loaded, files, directory)
        if problem:
            report.rebuilt, report.reason = True, problem
            log.warning("KahaDB index checkpoint does not match the journal (%s); "
                        "rebuilding the index from the journal", problem)
            loaded = None
    if loaded is not None:
        index = loaded.index
        start = loaded.position
        report.rebuilt = False
    else:
        index = StoreIndex()
        start = (min(files), FILE_HEADER_LEN) if files else (1, FILE_HEADER_LEN)
        if files:
            log.warning("KahaDB: rebuilding the index from %d data file(s) (%s)",
                        len(files), report.reason or "no checkpoint")

    sizes = {f: p.stat().st_size for f, p in files.items()}
    todo = sum(max(0, n - (start[1] if f == start[0] else 0))
               for f, n in sizes.items() if f >= start[0])
    keycache: dict[bytes, str] = {}
    quarantined: dict[int, Path] = {}
    ends: dict[int, int] = {}  # end of the valid records, for files that were scanned
    last_record: tuple[int, int] | None = None
    tail: tuple[int, int] | None = None
    next_progress = time.monotonic() + _PROGRESS_EVERY
    done_bytes = 0
    ids = list(files)
    for n_file, fid in enumerate(ids):
        if fid < start[0] and not config.check_for_corrupt_journal_files:
            continue
        path = files[fid]
        apply_from = start[1] if fid == start[0] else (FILE_HEADER_LEN if fid > start[0] else None)
        scan_from = apply_from if apply_from is not None and not config.check_for_corrupt_journal_files \
            else FILE_HEADER_LEN
        res = ScanResult()
        salvaged: dict[int, Salvage] = {}  # damaged span start -> what its records gave back
        with _mapped(path) as buf:
            for off, rtype, payload in scan(buf, fid, scan_from, res):
                if len(salvaged) < len(res.damage) and apply_from is not None:
                    _salvage(buf, fid, res.damage, apply_from, index, salvaged)
                if apply_from is None or off < apply_from:
                    continue
                try:
                    if rtype == RT_BATCH:
                        index.apply(parse_batch(payload, keycache), fid, off + REC_HEADER_LEN)
                    elif rtype == RT_STATE:
                        index.apply_state(parse_state(payload))
                except CorruptRecord as exc:
                    end = off + REC_HEADER_LEN + len(payload)
                    res.damage.append(Damage(off, end, str(exc)))
                    continue
                last_record = (fid, off)
                report.replayed_records += 1
                report.replayed_bytes += REC_HEADER_LEN + len(payload)
                if report.replayed_records % 4096 == 0 and time.monotonic() >= next_progress:
                    next_progress = time.monotonic() + _PROGRESS_EVERY
                    pct = 100.0 * (done_bytes + off) / todo if todo else 100.0
                    log.info("KahaDB recovery: db-%d.log (%d of %d), %.0f%% of %.1f MB, "
                             "%d records replayed", fid, n_file + 1, len(ids), min(pct, 100.0),
                             todo / 1e6, report.replayed_records)
            payload = memoryview(b"")  # release the last view so the mapping can close
            if apply_from is not None and fid != ids[-1]:  # a torn end of the last file
                _salvage(buf, fid, res.damage, apply_from, index, salvaged)  # was never acked
            if apply_from is not None:
                done_bytes += len(buf) - (apply_from if fid == start[0] else 0)
        ends[fid] = res.end
        is_last = fid == ids[-1]
        damaged = [d for d in res.damage if not (is_last and d.tail)]
        torn = [d for d in res.damage if is_last and d.tail]
        for d in damaged:
            if d.tail:  # the end of a file already rolled over: damage, not an interrupted write
                d.tail = False
                d.reason += ", at the end of a file that was complete"
        if res.header_error and (res.records or fid != ids[-1] or any(_nonzero(path))):
            damaged.insert(0, Damage(0, FILE_HEADER_LEN, f"file header: {res.header_error}"))
        elif res.header_error and not read_only:
            _reset_empty(path, fid, config)  # created but never written: start it afresh
        if damaged:
            dest = _quarantine(directory, path, read_only)
            quarantined[fid] = dest
            report.quarantined.append((fid, str(dest), damaged))
            for d in damaged:
                report.lost_spans.append((fid, d))
                sv = salvaged.get(d.start)
                if sv is not None:  # after the checkpoint: the index has only what was kept
                    report.lost.extend(sv.lost)
                    log.error("KahaDB db-%d.log: %s; moved the file to %s. %s", fid, d, dest,
                              sv.describe())
                    continue
                lost = index.drop_entries_between(fid, d.start, d.end)
                report.lost.extend(lost)
                log.error("KahaDB db-%d.log: %s; moved the file to %s. %s", fid, d, dest,
                          describe_lost(lost) if lost else
                          "No stored message recorded in the checkpoint was in it; records "
                          "written after the last checkpoint there are lost (their sends or "
                          "acks: possible lost messages or redeliveries)")
            if is_last:
                tail = (fid + 1, FILE_HEADER_LEN)
            continue
        for d in torn:
            report.truncated.append((fid, d.start, d.end - d.start))
            log.warning("KahaDB db-%d.log: %s; cutting the file at the last good record "
                        "(an interrupted write, never acknowledged as durable)", fid, d)
            if not read_only:
                _truncate(directory, path, d, config)
        if is_last:
            tail = (fid, res.end)

    if tail is None:
        tail = (ids[-1] + 1, FILE_HEADER_LEN) if ids else (1, FILE_HEADER_LEN)

    # Messages whose file vanished (not quarantined: those are salvaged).
    present = set(files) | set(quarantined)
    missing = sorted(f for f, fk in index.file_keys.items() if fk and f not in present)
    if missing:
        report.missing_files = missing
        detail = "; ".join(f"db-{f}.log: {_describe_keys(index.file_keys[f])}" for f in missing)
        if not config.ignore_missing_journalfiles:
            raise MissingJournalFiles(
                f"KahaDB data files are missing from {directory} but hold live messages: "
                f"{detail}. Restore them, or set ignoreMissingJournalfiles=\"true\" to start "
                f"without those messages")
        for f in missing:
            lost = index.drop_entries_in(f)
            report.lost.extend(lost)
            log.error("KahaDB db-%d.log is missing (ignoreMissingJournalfiles): %s", f,
                      describe_lost(lost))

    for f in quarantined:
        files.pop(f, None)
        ends.pop(f, None)
    report.seconds = time.perf_counter() - t0
    known = loaded.files if loaded is not None else {}
    sizes = {f: ends.get(f) or known.get(f) or p.stat().st_size
             for f, p in files.items() if p.exists()}
    return Recovered(index, sizes, tail, last_record,
                     loaded.position if loaded is not None else None, quarantined, report)


# ---------------------------------------------------------------------------


def _salvage(buf: object, fid: int, damage: list[Damage], apply_from: int, index: StoreIndex,
             done: dict[int, Salvage]) -> None:
    """Read what is intact out of the damaged spans found so far (after the
    checkpoint only), in journal order: before the next valid record is applied."""
    for d in damage:
        if d.start in done or d.start < apply_from:
            continue
        done[d.start] = salvage_span(buf, fid, d.start, d.end, index)  # type: ignore[arg-type]


def _load_checkpoint(index_dir: Path, config: KahaDBConfig, report: RecoveryReport,
                     read_only: bool) -> checkpoint.Loaded | None:
    if config.force_recover_index:
        report.rebuilt, report.reason = True, "forceRecoverIndex is set"
        return None
    try:
        loaded = checkpoint.load(index_dir)
    except checkpoint.CheckpointError as exc:
        report.rebuilt, report.reason = True, str(exc)
        log.warning("KahaDB index checkpoint unusable: %s; rebuilding from the journal", exc)
        if not read_only:
            bad = index_dir / checkpoint.NAME
            if config.archive_corrupted_index:
                aside = index_dir / f"{checkpoint.NAME}.corrupt-{int(time.time())}"
                with contextlib.suppress(OSError):
                    os.replace(bad, aside)
                log.warning("kept the damaged checkpoint as %s (archiveCorruptedIndex)", aside)
            else:
                with contextlib.suppress(OSError):
                    bad.unlink()
        return None
    if loaded is None:
        report.rebuilt, report.reason = True, "no index checkpoint"
    return loaded


def _checkpoint_mismatch(loaded: checkpoint.Loaded, files: dict[int, Path],
                         directory: Path) -> str:
    """Why the checkpoint cannot be trusted against these data files ('' if it can)."""
    fid, off = loaded.position
    if fid not in files:
        return f"its journal position db-{fid}.log:{off} is missing"
    size = files[fid].stat().st_size
    if off > size:
        return f"db-{fid}.log is shorter ({size} bytes) than its checkpointed position {off}"
    if loaded.last_record is not None:
        # The last record before the position must be intact: the checkpoint was
        # written only after the journal up to it was synced.
        lf, loff = loaded.last_record
        if lf not in files:
            return f"db-{lf}.log, holding its last record, is missing"
        with _mapped(files[lf]) as buf:
            found = validate_at(buf, lf, loff)
            if not isinstance(found, tuple):
                return f"its last record db-{lf}.log:{loff} is not intact ({found})"
            if lf == fid and loff + REC_HEADER_LEN + found[1] != off:
                return f"its last record db-{lf}.log:{loff} does not end at its position"
    return ""


@contextlib.contextmanager
def _mapped(path: Path):  # type: ignore[no-untyped-def]
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            yield b""
            return
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield mm
        finally:
            with contextlib.suppress(BufferError):
                mm.close()


def _nonzero(path: Path) -> list[bool]:
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            if chunk.strip(b"\0"):
                return [True]
    return []


def _reset_empty(path: Path, fid: int, config: KahaDBConfig) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(0)
        fh.write(file_header(fid))
        if config.preallocates:
            preallocate(fh.fileno(), config.journal_max_file_length, config.preallocation_strategy,
                        FILE_HEADER_LEN)
        fh.flush()
        os.fsync(fh.fileno())


def _truncate(directory: Path, path: Path, d: Damage, config: KahaDBConfig) -> None:
    """Cut a torn tail; keep its bytes in quarantine when it is bigger than one batch
    could be (then it is not just an interrupted write)."""
    size = path.stat().st_size
    if d.end - d.start > config.journal_max_write_batch_size + (1 << 16):
        qdir = directory / QUARANTINE
        qdir.mkdir(exist_ok=True)
        keep = qdir / f"{path.name}.tail-{d.start}-{int(time.time())}"
        with open(path, "rb") as src, open(keep, "wb") as dst:
            src.seek(d.start)
            shutil.copyfileobj(src, dst)
        log.warning("kept the %d cut bytes of %s as %s", d.end - d.start, path.name, keep)
    fd = os.open(path, os.O_RDWR)
    try:
        os.ftruncate(fd, d.start)
        if config.preallocates and size > d.start:
            preallocate(fd, max(size, config.journal_max_file_length),
                        config.preallocation_strategy, d.start)
        os.fsync(fd)
    finally:
        os.close(fd)


def _quarantine(directory: Path, path: Path, read_only: bool) -> Path:
    qdir = directory / QUARANTINE
    dest = qdir / path.name
    if read_only:
        return path
    qdir.mkdir(exist_ok=True)
    if dest.exists():
        dest = qdir / f"{path.name}.{int(time.time() * 1000)}"
    os.replace(path, dest)
    fsync_dir(qdir)
    fsync_dir(directory)
    return dest


def _describe_keys(fk: dict[str, int]) -> str:
    return ", ".join(f"{n} of {k}" for k, n in sorted(fk.items(), key=lambda kv: -kv[1]))
