"""Disk reclaim: delete dead data files, and rewrite what pins old files forward.

Every `cleanupInterval` the cleaner

1. checkpoints (only files wholly before the checkpoint's position are ever
   touched, so recovery never needs a file that is gone);
2. **compacts** files that have been stuck — their live count unchanged for
   `compactAcksAfterNoGC` cycles — when that pays:

   * live messages of a file less than `compactionThreshold` live are copied to
     the end of the journal (MOVE records) so a few old messages do not keep a
     32 MB file (ActiveMQ only does this for acks; here it is messages too);
   * the removals ("acks") of a file with nothing live are copied forward
     (ACK_FWD / PURGE records) when they refer to older files still present —
     the classic KahaDB pin, where one file full of acks keeps every file whose
     messages it acknowledged, and those keep it;

3. **deletes** (or archives, `archiveDataLogs`) every file with nothing live
   whose ack references point only at files already gone, after a STATE record
   (destinations, subscriptions, sequence numbers) is durable, so a rebuild of
   the index from the remaining files loses nothing.

Correctness rests on two rules: a MOVE is only written for a message that is
live at that instant on the loop (liveness check and append happen in one
synchronous step, and removals are applied to the index when they are
appended), so replay never resurrects a message; and a file is only deleted
when nothing in it is needed by a rebuild — neither its messages (none live)
nor its removals (they only matter while the files they refer to exist).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from relaymq_kahadb.config import KahaDBConfig
from relaymq_kahadb.index import StoreIndex
from relaymq_kahadb.journal.files import fsync_dir
from relaymq_kahadb.journal.reader import JournalReader
from relaymq_kahadb.journal.records import (
    OP_ACK_FWD,
    OP_MOVE,
    OP_PURGE,
    OP_REMOVE,
    OP_REMOVE_DEST,
    OP_REMOVE_RUN,
    OP_REMOVE_SUB,
    RT_BATCH,
    BatchEncoder,
    Op,
    parse_batch,
    scan,
)

log = logging.getLogger("relaymq.kahadb.cleanup")

_CHUNK = 4 << 20  # bytes of messages per MOVE batch


@dataclass(slots=True)
class CleanupResult:
    deleted: list[int] = field(default_factory=list)
    relocated_files: list[int] = field(default_factory=list)
    relocated_bytes: int = 0
    forwarded_files: list[int] = field(default_factory=list)
    forwarded_acks: int = 0


class JournalStore(Protocol):
    """What the cleaner needs of its store (`KahaDBPersistenceAdapter` is one): the
    journal's files and index, and the calls that append, checkpoint and forget."""

    config: KahaDBConfig
    directory: Path
    index: StoreIndex
    #: data file id -> bytes of records written
    files: dict[int, int]
    ckpt_pos: tuple[int, int] | None

    @property
    def reader(self) -> JournalReader: ...

    def append(self, rtype: int, payload: bytes, ops: list[Op] | None,
               fut: asyncio.Future[None] | None, sync: bool = True) -> tuple[int, int]: ...

    async def append_state(self) -> None: ...

    async def checkpoint(self, force: bool = False) -> None: ...

    def data_file_path(self, file_id: int) -> Path: ...

    def forget_file(self, file_id: int) -> None: ...

    def usage_report(self, top: int = 5) -> str: ...


class Cleaner:
    def __init__(self, store: JournalStore) -> None:
        self.store = store
        self._stuck: dict[int, tuple[int, int]] = {}  # file -> (live count, cycles unchanged)
        self._last_live_bytes: int | None = None
        self._running = asyncio.Lock()
        self.last = CleanupResult()

    async def run(self) -> CleanupResult:
        """One cleanup cycle (serialised: cycles never overlap)."""
        async with self._running:
            self.last = res = CleanupResult()
            store = self.store
            await store.checkpoint()
            if store.ckpt_pos is None:
                return res
            limit = store.ckpt_pos[0]
            candidates = sorted(f for f in store.files if f < limit)
            live_bytes = store.index.live_bytes()
            growing = self._last_live_bytes is not None and live_bytes > self._last_live_bytes
            self._last_live_bytes = live_bytes
            cfg = store.config
            if cfg.enable_ack_compaction and (cfg.compact_acks_ignores_store_growth or not growing):
                await self._compact(candidates, res)
            await self._delete(candidates, res)
            for f in list(self._stuck):
                if f not in store.files:
                    del self._stuck[f]
            if res.deleted or res.relocated_files or res.forwarded_files:
                log.info("KahaDB cleanup: deleted %s; moved %d live bytes out of %s; "
                         "forwarded %d acks out of %s; %s",
                         _names(res.deleted) or "nothing", res.relocated_bytes,
                         _names(res.relocated_files) or "no file", res.forwarded_acks,
                         _names(res.forwarded_files) or "no file", store.usage_report())
            return res

    async def salvage(self, quarantined: dict[int, Path]) -> None:
        """Copy everything still needed out of quarantined files, then forget them."""
        store = self.store
        for fid in sorted(quarantined):
            res = CleanupResult()
            await self._relocate(fid, res, budget=None)
            await self._forward_acks(fid, res)
            store.forget_file(fid)
            await store.append_state()  # its destination/subscription records live on here
            log.warning("KahaDB: salvaged %d live bytes out of quarantined db-%d.log (%s); "
                        "the quarantined copy is kept for inspection",
                        res.relocated_bytes, fid, quarantined[fid])

    # -- compaction -----------------------------------------------------------

    async def _compact(self, candidates: list[int], res: CleanupResult) -> None:
        store = self.store
        cfg = store.config
        idx = store.index
        budget = cfg.max_compaction_bytes_per_cycle
        for f in candidates:
            if f not in store.files:
                continue
            live = idx.live_in_file(f)
            prev = self._stuck.get(f)
            cycles = prev[1] + 1 if prev is not None and prev[0] == live else 0
            self._stuck[f] = (live, cycles)
            if cycles < cfg.compact_acks_after_no_gc:
                continue
            size = store.files.get(f, 0) or 1
            if live and idx.file_bytes.get(f, 0) < cfg.compaction_threshold * size and budget > 0:
                budget -= await self._relocate(f, res, budget)
            if not idx.live_in_file(f) and self._pinning(f):
                await self._forward_acks(f, res)

    def _pinning(self, f: int) -> set[int]:
        """Older files still present that `f`'s removals refer to."""
        refs = self.store.index.ack_refs.get(f) or set()
        return {r for r in refs if r in self.store.files and r != f}

    async def _relocate(self, f: int, res: CleanupResult, budget: int | None) -> int:
        """Copy the live messages of `f` to the journal's end; returns bytes moved."""
        store = self.store
        idx = store.index
        entries: list[tuple[str, int, int, int]] = []
        for key in list(idx.file_keys.get(f, {})):
            k = idx.keys.get(key)
            if k is not None:
                entries.extend((key, seq, off, ln) for seq, off, ln in k.entries_in_file(f))
        entries.sort(key=lambda e: e[2])
        moved = 0
        i = 0
        while i < len(entries):
            chunk: list[tuple[str, int, int, int]] = []
            nbytes = 0
            while i < len(entries) and (nbytes < _CHUNK or not chunk):
                chunk.append(entries[i])
                nbytes += entries[i][3]
                i += 1
            datas = await asyncio.to_thread(store.reader.read, [(f, off, ln) for _, _, off, ln in chunk])
            # From here to `append` nothing awaits: liveness is checked and the MOVE
            # is appended in one step, so no removal can slip in between.
            enc = BatchEncoder(store.config.checksum_journal_files)
            shared: dict[int, tuple[int, int]] = {}
            for (key, seq, off, ln), data in zip(chunk, datas, strict=True):
                if idx.location(key, seq) != (f, off, ln):
                    continue  # consumed or moved meanwhile
                if data is None:
                    log.error("KahaDB: stored message %s seq %d at db-%d.log:%d fails its "
                              "checksum; it is lost and removed from the store", key, seq, f, off)
                    enc.remove(OP_REMOVE, key, seq, f)
                    continue
                hit = shared.get(off)
                if hit is not None:
                    enc.ref(key, seq, hit[0], hit[1])
                else:
                    shared[off] = (enc.message(OP_MOVE, key, seq, data), ln)
                    moved += ln
            if enc.ops:
                fut = asyncio.get_running_loop().create_future()
                store.append(RT_BATCH, enc.payload(), enc.ops, fut, True)
                await fut
            if budget is not None and moved >= budget:
                break
        if moved:
            res.relocated_files.append(f)
            res.relocated_bytes += moved
        return moved

    async def _forward_acks(self, f: int, res: CleanupResult) -> None:
        """Re-append the removals in `f` that older, still present files need."""
        store = self.store
        ops = await asyncio.to_thread(_removals_in, store.data_file_path(f), f)
        present = set(store.files)
        present.discard(f)
        enc = BatchEncoder()
        for op in ops:
            code, key = op[0], op[1]
            if code in (OP_REMOVE, OP_ACK_FWD):
                if op[3] in present and op[3] < f:
                    enc.remove(OP_ACK_FWD, key, op[2], op[3])
            elif code == OP_REMOVE_RUN:
                for seq, target in zip(op[2], op[3], strict=True):
                    if target in present and target < f:
                        enc.remove(OP_ACK_FWD, key, seq, target)
            else:
                targets = tuple(t for t in op[3] if t in present and t < f)
                if targets:
                    enc.drop(OP_PURGE, key, op[2], targets)
        if enc.ops:
            fut = asyncio.get_running_loop().create_future()
            store.append(RT_BATCH, enc.payload(), enc.ops, fut, True)
            await fut
            res.forwarded_acks += len(enc.ops)
        store.index.ack_refs.pop(f, None)
        res.forwarded_files.append(f)

    # -- deletion -------------------------------------------------------------

    async def _delete(self, candidates: list[int], res: CleanupResult) -> None:
        store = self.store
        idx = store.index
        present = set(store.files)
        gone: set[int] = set()
        doomed: list[int] = []
        for f in candidates:
            if f not in present or idx.live_in_file(f):
                continue
            refs = idx.ack_refs.get(f) or set()
            if any(r in present and r not in gone and r != f for r in refs):
                continue
            doomed.append(f)
            gone.add(f)
        if not doomed:
            return
        await store.append_state()
        plan = [(f, store.data_file_path(f), sorted(idx.ack_refs.get(f) or ())) for f in doomed]
        archive = None
        if store.config.archive_data_logs:
            archive = Path(store.config.directory_archive or (store.directory / "archive"))
        await asyncio.to_thread(_remove_files, store.directory, plan, archive)
        for f in doomed:
            store.forget_file(f)
            res.deleted.append(f)


def _removals_in(path: Path, file_id: int) -> list[tuple]:  # type: ignore[type-arg]
    """The removal operations (with their targets) recorded in one data file."""
    keys: dict[bytes, str] = {}
    out = []
    data = path.read_bytes()
    for _off, rtype, payload in scan(data, file_id):
        if rtype != RT_BATCH:
            continue
        for op in parse_batch(payload, keys):
            if op[0] in (OP_REMOVE, OP_REMOVE_RUN, OP_ACK_FWD, OP_REMOVE_DEST, OP_REMOVE_SUB,
                         OP_PURGE):
                out.append(op)
    return out


def _remove_files(directory: Path, plan: list[tuple[int, Path, list[int]]],
                  archive: Path | None) -> None:
    """Delete (or archive) files in order. A file whose removals refer to a file
    deleted earlier in this same pass waits for that deletion to be durable, so a
    crash can never leave a file's adds without the file holding their removals."""
    unsynced: set[int] = set()
    if archive is not None:
        archive.mkdir(parents=True, exist_ok=True)
    for f, path, refs in plan:
        if unsynced.intersection(refs):
            fsync_dir(directory)
            unsynced.clear()
        if archive is not None:
            shutil.move(str(path), str(archive / path.name))
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        unsynced.add(f)
    fsync_dir(directory)


def _names(files: list[int]) -> str:
    return ", ".join(f"db-{f}.log" for f in files)
