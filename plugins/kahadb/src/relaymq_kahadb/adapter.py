"""`<kahaDB>`: the journal store, wired together.

The event loop owns the index and decides where each record goes in the
journal (`append`), applying the record's operations to the index at once.
Because both happen in the order `write()` is called, the index always equals
"the journal up to the last reserved record" — exactly what a checkpoint
snapshot must describe, and what lets compaction decide "is this message still
live?" without racing in-flight acks. The writer thread then makes the record
durable and completes the caller's future; reads that reach a record not yet
written wait for the writer (`JournalWriter.wait_written`).

Modules: `journal/` (format, writer, reader), `encoding` (kernel ops -> records),
`index` (live messages), `checkpoint`, `recovery`, `compaction` (disk reclaim),
`lock`, `inspect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relaymq.config.report import warn_once
from relaymq.model.codec import CorruptMessage, decode_message, encoded_span
from relaymq.model.message import Message
from relaymq.spi.persistence import (
    DestinationStats,
    DuplicateIdRecord,
    EncodedRecord,
    LockState,
    PersistenceAdapter,
    StoredMessage,
    StoreOp,
    SubscriptionRecord,
)

from relaymq_kahadb import checkpoint as ckpt
from relaymq_kahadb.compaction import Cleaner
from relaymq_kahadb.config import KahaDBConfig, size_text
from relaymq_kahadb.encoding import encode_ops, record_from_json
from relaymq_kahadb.errors import JournalError, StoreClosed
from relaymq_kahadb.index import StoreIndex
from relaymq_kahadb.journal.files import data_path
from relaymq_kahadb.journal.reader import JournalReader
from relaymq_kahadb.journal.records import (
    FILE_HEADER_LEN,
    OP_REMOVE,
    REC_HEADER_LEN,
    RT_BATCH,
    RT_STATE,
    BatchEncoder,
    Op,
    encode_state,
)
from relaymq_kahadb.journal.writer import BATCH_BOUNDS, SYNC_BOUNDS, JournalWriter, WriterStats
from relaymq_kahadb.lock import DirectoryLock
from relaymq_kahadb.locker import apply_locker
from relaymq_kahadb.recovery import Recovered, recover

if TYPE_CHECKING:
    from relaymq.config.model import PluginElement

log = logging.getLogger("relaymq.kahadb")


class KahaDBPersistenceAdapter(PersistenceAdapter):
    """ActiveMQ's `kahaDB` persistence adapter: journal + checkpointed index."""

    Config = KahaDBConfig
    persistent = True
    removal_runs = True  # a turn's acks of a destination: one REMOVE_RUN op

    def __init__(self, config: KahaDBConfig | None = None, **overrides: Any) -> None:
        if config is None:
            config = KahaDBConfig(**overrides)
        elif overrides:
            raise TypeError("pass a KahaDBConfig or keyword attributes, not both")
        self.config = config
        self._checksum = config.checksum_journal_files
        self.directory = Path(config.directory or "data/kahadb")
        self.index_dir = Path(config.index_directory) if config.index_directory else self.directory
        #: Read by the broker: dispatch before the store write completes.
        self.concurrent_store_and_dispatch_queues = config.concurrent_store_and_dispatch_queues
        self.concurrent_store_and_dispatch_topics = config.concurrent_store_and_dispatch_topics
        self.index = StoreIndex()
        self.files: dict[int, int] = {}  # data file id -> bytes of records written
        self.ckpt_pos: tuple[int, int] | None = None
        self.recovery: Recovered | None = None
        self._disk = 0
        self._ckpt_size = 0
        self._ckpt_seconds = 0.0
        self._tail_file = 1
        self._tail_off = FILE_HEADER_LEN
        self._last_record: tuple[int, int] | None = None
        self._file_len = config.journal_max_file_length
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: JournalWriter | None = None
        self._reader: JournalReader | None = None
        self._lock = DirectoryLock(self.directory)
        self._ckpt_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._open = False
        self.cleaner = Cleaner(self)

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        """Check the attributes without building anything (`relaymq config check`);
        returns the warnings (attributes RelayMQ ignores)."""
        from relaymq.config.report import Report
        from relaymq.config.typed import convert

        report = Report(strict=strict, quiet=True)  # returned: the caller reports them
        config = convert(KahaDBConfig, element, strict=strict, report=report, ignore=("locker",))
        apply_locker(config, element, strict=strict, report=report)
        report.raise_if_errors()
        where = f" at {element.origin}" if element.origin.line else ""
        # the same lines the store logs when it starts (`relaymq run`)
        return report.warnings + [f"<kahaDB>{where}: {line}" for line in config.ignored_settings()]

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any = None) -> KahaDBPersistenceAdapter:
        """Build from `<kahaDB .../>`; the default directory follows the broker's
        `dataDirectory`, as ActiveMQ's `${activemq.data}/kahadb`."""
        from relaymq.config.typed import convert

        strict = bool(getattr(getattr(broker, "plugins", None), "strict", False))
        config = convert(KahaDBConfig, element, strict=strict, ignore=("locker",))
        apply_locker(config, element, strict=strict)
        broker_cfg = getattr(broker, "config", None)
        if not config.directory:
            data = getattr(broker_cfg, "data_directory", None) or "data"
            config.directory = str(Path(data) / "kahadb")
        store = cls(config)
        # the lock file names the broker, so a waiting slave can say who the master is
        store._lock.owner = str(getattr(broker_cfg, "broker_name", None) or "")
        return store

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        if self._open:
            return
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        await self._lock.acquire(
            wait=not cfg.fail_if_locked, interval=cfg.lock_acquire_sleep_interval / 1000,
            waiting=lambda why: self.lock_changed(LockState.WAITING, why))
        self.lock_changed(LockState.HELD, f"{self._lock.path} taken by pid {os.getpid()}")
        try:
            where = f" at {cfg.origin}" if cfg.origin.line else ""
            for line in cfg.ignored_settings():
                warn_once(log, f"<kahaDB>{where}: {line}")
            rec = await asyncio.to_thread(recover, self.directory, self.index_dir, cfg)
            self.recovery = rec
            self.index = rec.index
            self.files = dict(rec.files)
            self._tail_file, self._tail_off = rec.tail
            self._last_record = rec.last_record
            self.files.setdefault(self._tail_file, self._tail_off)
            self._disk = sum(self.files.values())
            self.ckpt_pos = rec.checkpoint_position
            self._writer = JournalWriter(
                self.directory, self._loop, tail_file=self._tail_file, tail_offset=self._tail_off,
                strategy=cfg.journal_disk_sync_strategy,
                interval=cfg.journal_disk_sync_interval / 1000,
                max_batch_bytes=cfg.journal_max_write_batch_size, file_length=self._file_len,
                preallocation=cfg.preallocation_strategy if cfg.preallocates else None,
                spare=cfg.preallocation_scope == "entire_journal_async")
            await asyncio.to_thread(self._writer.start)
            self._reader = JournalReader(self.directory, self._writer, cfg.checksum_journal_files)
            self._open = True
            for fid, path in rec.quarantined.items():
                self._reader.paths[fid] = path
            if rec.quarantined:
                await self.cleaner.salvage(rec.quarantined)
            if rec.report.replayed_records or rec.report.rebuilt or rec.quarantined:
                await self.checkpoint(force=True)
            log.info("KahaDB %s: %s", self.directory, rec.report.summary())
        except BaseException:
            await self._close_quietly()
            raise
        if cfg.checkpoint_interval > 0:
            self._tasks.append(asyncio.create_task(self._checkpoint_loop(), name="kahadb-checkpoint"))
        if cfg.cleanup_interval > 0:
            self._tasks.append(asyncio.create_task(self._cleanup_loop(), name="kahadb-cleanup"))
        if cfg.lock_keep_alive_period >= 0:
            self._tasks.append(asyncio.create_task(self._lock_watch(), name="kahadb-lock"))

    async def stop(self) -> None:
        if not self._open:
            return
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        try:
            if self._writer is not None and self._writer.failed is None:
                await self.flush()
                if self.config.cleanup_on_stop:
                    try:
                        await self.cleaner.run()
                    except Exception:  # noqa: BLE001 - a failed cleanup must not block the stop
                        log.exception("KahaDB cleanup on stop failed")
                await self.checkpoint()
        finally:
            await self._close_quietly()

    async def abandon(self) -> None:
        """The lock is lost: stop without flushing, cleaning up or checkpointing (the
        directory may be another broker's now)."""
        for t in self._tasks:
            t.cancel()
        self._tasks.clear()
        await self._close_quietly()

    async def _lock_watch(self) -> None:
        """ActiveMQ's lock keep-alive: check every `lockKeepAlivePeriod` ms that the
        lock file is still the one this store locked."""
        period = (self.config.lock_keep_alive_period or 5000) / 1000
        while self._open:
            await asyncio.sleep(period)
            why = self._lock.lost()
            if why is not None and self._open:
                log.error("KahaDB %s: lock lost: %s", self.directory, why)
                self.lock_changed(LockState.LOST, why)
                return

    async def _close_quietly(self) -> None:
        self._open = False
        if self._writer is not None:
            self._writer.kick_now()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._writer.stop)
            self._writer = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._lock.held:
            self._lock.release()
            if self.lock_state == LockState.HELD:
                self.lock_state = LockState.NONE

    # -- writing --------------------------------------------------------------

    async def write(self, ops: Sequence[StoreOp], *, sync: bool = True) -> None:
        if not ops:
            return
        payload, parsed = encode_ops(ops, self.index, self._checksum)
        fut = self._loop.create_future()  # type: ignore[union-attr]
        self.append(RT_BATCH, payload, parsed, fut, sync)
        await fut

    def append(self, rtype: int, payload: bytes, ops: list[Op] | None,
               fut: asyncio.Future[None] | None, sync: bool = True) -> tuple[int, int]:
        """Reserve the record's place, apply it to the index and queue it for the
        writer, all in one step on the loop (the only place records are added)."""
        writer = self._writer
        if not self._open or writer is None:
            raise StoreClosed(f"the KahaDB store at {self.directory} is not started")
        if writer.failed is not None:
            raise JournalError(f"the KahaDB journal failed: {writer.failed}") from writer.failed
        n = REC_HEADER_LEN + len(payload)
        f = self._tail_file
        off = self._tail_off
        if off + n > self._file_len and off > FILE_HEADER_LEN:
            f, off = self._roll()
        end = off + n
        self._tail_off = end
        self._last_record = (f, off)
        size = self.files[f]
        if end > size:
            self.files[f] = end
            self._disk += end - size
        if ops:
            self.index.apply(ops, f, off + REC_HEADER_LEN)
        writer.submit(f, off, rtype, payload, fut, sync)
        return f, off

    def _roll(self) -> tuple[int, int]:
        self._tail_file += 1
        self._tail_off = FILE_HEADER_LEN
        self.files[self._tail_file] = FILE_HEADER_LEN
        self._disk += self.files[self._tail_file]
        return self._tail_file, FILE_HEADER_LEN

    async def flush(self, sync: bool = True) -> None:
        """Wait until everything written so far is on disk (synced with `sync`)."""
        if self._writer is None:
            return
        fut = self._loop.create_future()  # type: ignore[union-attr]
        self._writer.flush(fut, sync)
        await fut

    async def append_state(self) -> None:
        """Write a STATE record and wait for it to be durable (before deleting files)."""
        idx = self.index
        payload = encode_state(list(idx.dests), idx.subs, idx.last_seq, idx.dup_ids)
        fut = self._loop.create_future()  # type: ignore[union-attr]
        self.append(RT_STATE, payload, None, fut, True)
        await fut
        await self.flush(sync=True)  # durable whatever the sync strategy

    # -- reading --------------------------------------------------------------

    async def destinations(self) -> list[str]:
        return sorted(self.index.dests)

    async def subscriptions(self) -> list[SubscriptionRecord]:
        return [record_from_json(r) for r in self.index.subs.values()]

    async def duplicate_ids(self) -> list[DuplicateIdRecord]:
        return [DuplicateIdRecord(address, seq, ids[seq])
                for address, ids in sorted(self.index.dup_ids.items()) for seq in sorted(ids)]

    def _entries(self, dest: str, after: int, limit: int | None
                 ) -> tuple[JournalReader, list[tuple[int, int, int, int]]] | None:
        """The journal reader and the index entries (seq, file, offset, length) a read
        of `dest` returns; None when there are none."""
        k = self.index.keys.get(dest)
        if k is None or not k.live or (limit is not None and limit <= 0):
            return None
        entries = k.read(after, limit)
        if not entries:
            return None
        if self._reader is None:
            raise StoreClosed(f"the KahaDB store at {self.directory} is not started")
        return self._reader, entries

    async def read(self, dest: str, after: int = 0, limit: int | None = None) -> list[StoredMessage]:
        found = self._entries(dest, after, limit)
        if found is None:
            return []
        reader, entries = found
        results = await asyncio.to_thread(_read_decode, reader, entries)
        out: list[StoredMessage] = []
        bad: list[tuple[int, tuple[int, int, int], str]] = []
        for (seq, f, off, ln), res in zip(entries, results, strict=True):
            if isinstance(res, Message):
                out.append(StoredMessage(seq, res))
            else:
                bad.append((seq, (f, off, ln), res))
        if bad:
            self._drop_corrupt(dest, bad)
        return out

    async def read_encoded(self, dest: str, after: int = 0, limit: int | None = None,
                           encoding: str = "amqp") -> list[EncodedRecord]:
        """`read` as the stored transport bytes (`PersistenceAdapter.read_encoded`):
        the record's header says where they are, no `Message` is built."""
        found = self._entries(dest, after, limit)
        if found is None:
            return []
        reader, entries = found
        out, bad = await asyncio.to_thread(_read_encoded, reader, entries, encoding)
        if bad:
            self._drop_corrupt(dest, bad)
        return out

    def _drop_corrupt(self, dest: str, bad: list[tuple[int, tuple[int, int, int], str]]) -> None:
        """A stored message failed its checksum: report exactly which, and remove it
        (journaled) so it is not handed out or reported again."""
        enc = BatchEncoder()
        for seq, (f, off, _ln), why in bad:
            if self.index.location(dest, seq) != (f, off, _ln):
                continue
            log.error("KahaDB: stored message %s seq %d at db-%d.log:%d is unreadable (%s); "
                      "it is lost and removed from the store", dest, seq, f, off, why)
            enc.remove(OP_REMOVE, dest, seq, f)
        if enc.ops:
            self.append(RT_BATCH, enc.payload(), enc.ops, None, False)

    async def stats(self, dest: str) -> DestinationStats:
        k = self.index.keys.get(dest)
        last = self.index.last_seq.get(dest, 0)
        if k is None:
            return DestinationStats(last_seq=last)
        return DestinationStats(count=k.live, size=k.nbytes, last_seq=last)

    def size(self) -> int:
        """Bytes of journal written and not yet reclaimed, plus the checkpoint (as
        ActiveMQ's journal disk size: preallocated, unwritten space is not counted)."""
        return self._disk + self._ckpt_size

    def describe(self) -> str:
        c = self.config
        return (f"kahaDB {self.directory} (journalDiskSyncStrategy={c.journal_disk_sync_strategy}, "
                f"journalMaxFileLength={size_text(c.journal_max_file_length)})")

    def usage_report(self, top: int = 5) -> str:
        """Which destinations hold the space, for the broker's store-full log line."""
        keys = sorted(self.index.keys.items(), key=lambda kv: -kv[1].nbytes)[:top]
        held = ", ".join(f"{k} {v.nbytes / 1e6:.1f} MB ({v.live} msgs)" for k, v in keys if v.live)
        live = self.index.live_bytes()
        return (f"KahaDB {self.directory}: {self.size() / 1e6:.1f} MB on disk for "
                f"{live / 1e6:.1f} MB of live messages; largest: {held or 'none'}")

    async def reclaim(self) -> None:
        """Run a cleanup cycle now (for the broker's flow control when the store is
        at its `storeUsage` limit, instead of waiting for `cleanupInterval`)."""
        await self.cleaner.run()

    def journal_stats(self) -> dict[str, Any]:
        """Counters for benchmarks and monitoring."""
        w = self._writer
        s = w.stats if w is not None else None
        return {
            "records": s.records if s else 0, "writes": s.writes if s else 0,
            "syncs": s.syncs if s else 0, "bytes": s.bytes if s else 0,
            "records_per_sync": s.records_per_sync() if s else 0.0,
            "files": len(self.files), "disk_bytes": self.size(),
            "live_messages": self.index.live_entries(), "live_bytes": self.index.live_bytes(),
            "checkpoint_bytes": self._ckpt_size, "checkpoint_seconds": self._ckpt_seconds,
        }

    def journal_metrics(self) -> dict[str, Any]:
        """For monitoring (relaymq-console's /metrics and dashboard): the journal's
        syncs with their latency histogram and its write batches with their sizes.
        Histograms are `(upper bound, count)` pairs, not cumulative, the last bound
        `inf`."""
        w = self._writer
        s = w.stats if w is not None else WriterStats()
        return {
            "store": "kahadb", "syncs": s.syncs, "sync_seconds": s.sync_seconds,
            "sync_buckets": _pairs(SYNC_BOUNDS, s.sync_buckets),
            "batches": s.batches, "batch_records": s.records,
            "batch_buckets": _pairs(BATCH_BOUNDS, s.batch_buckets),
            "records": s.records, "bytes": s.bytes,
        }

    # -- checkpoints and cleanup ---------------------------------------------

    async def checkpoint(self, force: bool = False) -> None:
        """Snapshot the index and write it once the journal up to it is synced."""
        async with self._ckpt_lock:
            if self._writer is None:
                return
            pos = (self._tail_file, self._tail_off)
            if not force and not self.index.changes and self.ckpt_pos == pos:
                return
            snap = ckpt.snapshot(self.index, pos, self.files, self._last_record)
            changes, self.index.changes = self.index.changes, 0
            try:
                await self.flush(sync=True)
                t = time.perf_counter()
                self._ckpt_size = await asyncio.to_thread(
                    ckpt.write, self.index_dir, snap, self.config.enable_index_disk_syncs)
                self._ckpt_seconds = time.perf_counter() - t
            except BaseException:
                self.index.changes += changes or 1
                raise
            self.ckpt_pos = pos

    async def _checkpoint_loop(self) -> None:
        interval = self.config.checkpoint_interval / 1000
        while True:
            # Never spend more than ~10% of the time writing checkpoints (large indexes).
            await asyncio.sleep(max(interval, 10 * self._ckpt_seconds))
            try:
                if self.index.changes:
                    await self.checkpoint()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep checkpointing; the journal is the truth
                log.exception("KahaDB checkpoint failed; will retry")

    async def _cleanup_loop(self) -> None:
        interval = self.config.cleanup_interval / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.cleaner.run()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - reclaim again next cycle
                log.exception("KahaDB cleanup failed; will retry")

    def data_file_path(self, file_id: int) -> Path:
        if self._reader is not None and file_id in self._reader.paths:
            return self._reader.paths[file_id]
        return data_path(self.directory, file_id)

    @property
    def reader(self) -> JournalReader:
        assert self._reader is not None
        return self._reader

    @property
    def tail_file(self) -> int:
        return self._tail_file

    def forget_file(self, file_id: int) -> None:
        """A data file was deleted or archived."""
        size = self.files.pop(file_id, 0)
        self._disk -= size
        self.index.forget_file(file_id)
        if self._reader is not None:
            self._reader.retire(file_id)


def _read_decode(reader: JournalReader, entries: list[tuple[int, int, int, int]]) -> list[Any]:
    """Runs in a worker thread: bytes by location, then the kernel codec."""
    datas = reader.read([(f, off, ln) for _seq, f, off, ln in entries])
    out: list[Any] = []
    for data in datas:
        if data is None:
            out.append("checksum mismatch")
            continue
        try:
            out.append(decode_message(data))
        except CorruptMessage as exc:
            out.append(str(exc))
    return out


def _read_encoded(reader: JournalReader, entries: list[tuple[int, int, int, int]], encoding: str
                  ) -> tuple[list[EncodedRecord], list[tuple[int, tuple[int, int, int], str]]]:
    """Runs in a worker thread: bytes by location, then each record's `encoding`
    bytes cut out of it (`encoded_span`), or the decoded message when the record
    has none. Also the records that failed their checksum or are unreadable."""
    datas = reader.read([(f, off, ln) for _seq, f, off, ln in entries])
    out: list[EncodedRecord] = []
    bad: list[tuple[int, tuple[int, int, int], str]] = []
    for (seq, f, off, ln), data in zip(entries, datas, strict=True):
        if data is None:
            bad.append((seq, (f, off, ln), "checksum mismatch"))
            continue
        try:
            stamp, start, end = encoded_span(data, encoding)
            if start >= 0:
                out.append((seq, stamp, data[start:end]))
            else:
                m = decode_message(data)
                out.append((seq, m.timestamp, m))
        except CorruptMessage as exc:
            bad.append((seq, (f, off, ln), str(exc)))
    return out, bad


def _pairs(bounds: tuple[float, ...], counts: list[int]) -> list[tuple[float, int]]:
    return list(zip((*bounds, float("inf")), list(counts), strict=True))
