"""The journal writer: one thread, group commit, futures completed when durable.

Callers on the event loop never touch the disk. `write()` encodes a record,
reserves its position (the loop decides where every record goes, so the index
can be updated at once, in journal order) and queues it here. This thread takes
*everything* queued, writes it with one `pwrite` per data file and syncs once,
so N producers waiting on the disk cost one sync, not N: the batch grows by
itself while the previous sync is in flight. Completions go back to the loop in
one `call_soon_threadsafe` per batch.

Sync strategies (ActiveMQ's `journalDiskSyncStrategy`):

* ``always``: a future completes after `fdatasync` covered its record.
* ``periodic``: a future completes once the record is in the OS (survives the
  process being killed); the file is synced every `journalDiskSyncInterval` ms,
  so an OS crash or power loss loses at most that much.
* ``never``: as periodic, but the OS decides when to write back (Linux: up to
  ~30 s of dirty pages by default) — for data that may be lost.

Writes with ``sync=False`` complete after the write, like ``periodic``. A barrier
(`flush`) forces a sync whatever the strategy (checkpoints, stop, compaction).

An I/O error fails every pending and later future: the store is fail-stop, as
ActiveMQ's IOExceptionHandler stops the broker, because the index already
counts the records that did not reach the disk.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from relaymq_kahadb.errors import JournalError
from relaymq_kahadb.journal.files import create_data_file, data_path, fsync_dir, make_spare
from relaymq_kahadb.journal.records import FILE_HEADER_LEN, REC_HEADER_LEN, record_header

log = logging.getLogger("relaymq.kahadb.journal")

_STOP: Final = object()
_BARRIER: Final = object()


#: upper bounds (seconds) of the fdatasync latency histogram's buckets (+Inf after)
SYNC_BOUNDS: tuple[float, ...] = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                      0.1, 0.25, 0.5, 1.0, 2.5)
#: upper bounds of the records-per-batch histogram's buckets (+Inf after)
BATCH_BOUNDS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
                       4096.0)


def _sync_zeros() -> list[int]:
    return [0] * (len(SYNC_BOUNDS) + 1)


def _batch_zeros() -> list[int]:
    return [0] * (len(BATCH_BOUNDS) + 1)


@dataclass(slots=True)
class WriterStats:
    """Counters of the writer thread (read by the loop for monitoring: plain ints
    and floats, each updated by one thread). `sync_buckets[i]` counts syncs that
    took at most `SYNC_BOUNDS[i]` seconds (and more than the bound before; the last
    one: longer); `batch_buckets` counts write batches by their number of records
    against `BATCH_BOUNDS`. A batch is what the thread took from the queue and
    wrote with one `pwrite` per data file."""

    records: int = 0
    bytes: int = 0
    writes: int = 0  # pwrite batches
    syncs: int = 0
    sync_seconds: float = 0.0
    rolls: int = 0
    batches: int = 0
    sync_buckets: list[int] = field(default_factory=_sync_zeros)
    batch_buckets: list[int] = field(default_factory=_batch_zeros)

    def records_per_sync(self) -> float:
        return self.records / self.syncs if self.syncs else 0.0

    def add_sync(self, seconds: float) -> None:
        self.syncs += 1
        self.sync_seconds += seconds
        self.sync_buckets[bisect_left(SYNC_BOUNDS, seconds)] += 1

    def add_batch(self, records: int) -> None:
        self.batches += 1
        self.batch_buckets[bisect_left(BATCH_BOUNDS, float(records))] += 1


class JournalWriter:
    """Owns the tail data file's fd and the only thread that writes data files."""

    def __init__(
        self,
        directory: Path,
        loop: asyncio.AbstractEventLoop,
        *,
        tail_file: int,
        tail_offset: int,
        strategy: str = "always",
        interval: float = 1.0,
        max_batch_bytes: int = 4 << 20,
        file_length: int = 32 << 20,
        preallocation: str | None = None,
        spare: bool = False,
    ) -> None:
        self.directory = directory
        self.loop = loop
        self.strategy = strategy
        self.interval = interval
        self.max_batch_bytes = max_batch_bytes
        self.file_length = file_length
        self.preallocation = preallocation
        self.spare = spare
        self.stats = WriterStats()
        self._q: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._batch: list[tuple[object, ...]] = []  # loop side, not yet handed over
        self._kick_pending = False
        self._cond = threading.Condition()
        self._file = tail_file
        self._pos = tail_offset
        self._fd = -1
        #: (file, offset) up to which bytes are in the OS; readers wait on it.
        self.written = (tail_file, tail_offset)
        self._failed: BaseException | None = None
        self._dirty = False
        self._last_sync = time.monotonic()
        self._worker: threading.Thread | None = None
        self._spare_thread: threading.Thread | None = None

    # -- loop side ------------------------------------------------------------

    def start(self) -> None:
        path = data_path(self.directory, self._file)
        if path.exists():
            self._fd = os.open(path, os.O_RDWR)
        else:
            self._fd = create_data_file(self.directory, self._file, self.file_length,
                                        self.preallocation, self.spare)
            if self.strategy != "never":
                os.fsync(self._fd)
                fsync_dir(self.directory)
        self._maybe_prepare_spare()
        self._worker = threading.Thread(target=self._run, name="kahadb-journal-writer",
                                        daemon=True)
        self._worker.start()

    def submit(self, file_id: int, offset: int, rtype: int, payload: bytes,
               fut: asyncio.Future[None] | None, sync: bool) -> None:
        """Queue a record at its reserved position; `fut` completes when durable.

        Loop thread only. Items are handed to the writer thread once per loop
        iteration (`_kick`), not one by one: waking a thread costs a futex call
        and a GIL hand-over, and all producers resumed in one iteration can share it.
        """
        if self._failed is not None:
            raise JournalError(f"the journal failed earlier: {self._failed}") from self._failed
        self._batch.append((file_id, offset, rtype, payload, fut, sync))
        if not self._kick_pending:
            self._kick_pending = True
            self.loop.call_soon(self._kick)

    def flush(self, fut: asyncio.Future[None], sync: bool = True) -> None:
        """Complete `fut` once everything queued before it is written (and synced)."""
        if self._failed is not None:
            raise JournalError(f"the journal failed earlier: {self._failed}") from self._failed
        self._batch.append((_BARRIER, fut, sync))
        if not self._kick_pending:
            self._kick_pending = True
            self.loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._kick_pending = False
        if self._batch:
            batch, self._batch = self._batch, []
            self._q.put(batch)
            if self._failed is not None:  # lost the race with a failing writer thread
                self._drain_failed()

    def kick_now(self) -> None:
        """Hand over what is queued now (loop thread; before `stop`)."""
        self._kick()

    def stop(self) -> None:
        """Write what is queued, sync, close (blocking: call it off the loop)."""
        if self._worker is not None and self._worker.is_alive():
            self._q.put(_STOP)
            self._worker.join()
        if self._spare_thread is not None:
            self._spare_thread.join()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    # -- reader side ----------------------------------------------------------

    def wait_written(self, file_id: int, end: int, timeout: float = 30.0) -> None:
        """Block until the bytes of `file_id` up to `end` are in the OS."""
        want = (file_id, end)
        if self.written >= want:
            return
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.written < want:
                if self._failed is not None:
                    raise JournalError(str(self._failed)) from self._failed
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"journal did not reach db-{file_id}.log:{end}")
                self._cond.wait(left)

    # -- writer thread --------------------------------------------------------

    def _run(self) -> None:
        q = self._q
        pending: list[object] = []
        try:
            while True:
                if self.strategy == "periodic" and self._dirty:
                    wait = self.interval - (time.monotonic() - self._last_sync)
                    if wait <= 0:
                        self._sync()
                        continue
                    try:
                        item = q.get(timeout=wait)
                    except queue.Empty:
                        continue
                else:
                    item = q.get()
                pending = _items(item)
                size = _size(pending)
                while size < self.max_batch_bytes:
                    try:
                        more = _items(q.get_nowait())
                    except queue.Empty:
                        break
                    pending.extend(more)
                    size += _size(more)
                stop = self._process(pending)
                pending = []
                if stop:
                    return
        except BaseException as exc:  # noqa: BLE001 - every failure must fail the futures
            log.critical("KahaDB journal writer failed; the store stops accepting work: %s", exc,
                         exc_info=True)
            self._fail(exc, pending)

    def _process(self, items: list[object]) -> bool:
        bufs: list[bytes] = []
        buf_start = self._pos
        after_write: list[asyncio.Future[None]] = []
        after_sync: list[asyncio.Future[None]] = []
        must_sync = False
        stop = False
        records = 0
        for item in items:
            if item is _STOP:
                stop = True
                must_sync = True  # a clean stop leaves nothing unsynced, whatever the strategy
                continue
            assert isinstance(item, tuple)
            if item[0] is _BARRIER:
                _, fut, sync = item
                if sync:
                    must_sync = True
                    after_sync.append(fut)
                else:
                    after_write.append(fut)
                continue
            file_id, offset, rtype, payload, fut, sync = item
            if file_id != self._file:
                self._write(bufs, buf_start)
                bufs = []
                self._roll(file_id)
                buf_start = self._pos
            if offset != self._pos:
                raise JournalError(f"journal position mismatch: record reserved at "
                                   f"db-{file_id}.log:{offset}, writer at {self._pos}")
            bufs.append(record_header(file_id, offset, rtype, payload))
            bufs.append(payload)
            self._pos = offset + REC_HEADER_LEN + len(payload)
            records += 1
            self.stats.records += 1
            self.stats.bytes += REC_HEADER_LEN + len(payload)
            if fut is not None:
                if sync and self.strategy == "always":
                    must_sync = True
                    after_sync.append(fut)
                else:
                    after_write.append(fut)
        self._write(bufs, buf_start)
        if records:
            self.stats.add_batch(records)
        if after_write:
            self._complete(after_write)
        if must_sync or (self.strategy == "periodic" and self._dirty
                         and time.monotonic() - self._last_sync >= self.interval):
            self._sync()
        if after_sync:
            self._complete(after_sync)
        return stop

    def _write(self, bufs: list[bytes], start: int) -> None:
        if not bufs:
            return
        data = b"".join(bufs)
        view = memoryview(data)
        pos = start
        while view:
            n = os.pwrite(self._fd, view, pos)
            view = view[n:]
            pos += n
        self.stats.writes += 1
        self._dirty = True
        with self._cond:
            self.written = (self._file, pos)
            self._cond.notify_all()

    def _sync(self) -> None:
        if self._dirty:
            t = time.perf_counter()
            os.fdatasync(self._fd)
            self.stats.add_sync(time.perf_counter() - t)
            self._dirty = False
        self._last_sync = time.monotonic()

    def _roll(self, file_id: int) -> None:
        """Finish the current data file and start `file_id`."""
        if self.strategy != "never":
            self._sync()
        os.close(self._fd)
        self._fd = -1
        self._fd = create_data_file(self.directory, file_id, self.file_length,
                                    self.preallocation, self.spare)
        if self.strategy != "never":
            fsync_dir(self.directory)
        self._file = file_id
        self._pos = FILE_HEADER_LEN
        self.stats.rolls += 1
        self._dirty = True
        with self._cond:
            self.written = (file_id, self._pos)
            self._cond.notify_all()
        self._maybe_prepare_spare()

    def _maybe_prepare_spare(self) -> None:
        if not (self.spare and self.preallocation):
            return
        if (self.directory / "db-spare.prealloc").exists():
            return
        if self._spare_thread is not None and self._spare_thread.is_alive():
            return

        def work() -> None:
            try:
                make_spare(self.directory, self.file_length, self.preallocation or "zeros")
            except OSError as exc:  # only costs the next roll its preallocation time
                log.warning("could not preallocate the next KahaDB data file: %s", exc)

        self._spare_thread = threading.Thread(target=work, name="kahadb-prealloc", daemon=True)
        self._spare_thread.start()

    def _complete(self, futs: list[asyncio.Future[None]],
                  exc: BaseException | None = None) -> None:
        try:
            self.loop.call_soon_threadsafe(_resolve, futs, exc)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _fail(self, exc: BaseException, pending: list[object]) -> None:
        err = exc if isinstance(exc, JournalError) else JournalError(f"journal write failed: {exc}")
        self._failed = err
        self._drain_failed(pending)
        with self._cond:
            self._cond.notify_all()

    def _drain_failed(self, pending: list[object] = ()) -> None:  # type: ignore[assignment]
        err = self._failed
        items = list(pending)
        while True:
            try:
                items.extend(_items(self._q.get_nowait()))
            except queue.Empty:
                break
        futs: list[asyncio.Future[None]] = []
        for item in items:
            if isinstance(item, tuple):
                fut = item[1] if item[0] is _BARRIER else item[4]
                if fut is not None:
                    futs.append(fut)
        self._complete(futs, err)


def _items(got: object) -> list[object]:
    return got if isinstance(got, list) else [got]


def _size(items: list[object]) -> int:
    return sum(len(i[3]) for i in items if isinstance(i, tuple) and len(i) == 6)


def _resolve(futs: list[asyncio.Future[None]], exc: BaseException | None) -> None:
    for f in futs:
        if not f.done():
            if exc is None:
                f.set_result(None)
            else:
                f.set_exception(exc)
