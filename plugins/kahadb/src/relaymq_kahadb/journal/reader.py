"""Reading message bytes back by location, off the event loop.

The index keeps (file, offset, length) per message; this turns a page of
locations into bytes with as few `pread`s as possible: locations are sorted and
neighbours in one file (a queue's messages usually sit close together) are read
as one span. Each message's own crc32 (stored just before it) is checked when
`checksumJournalFiles` is on, so a bit flipped on disk after recovery is
reported, never handed to a consumer.

File descriptors are cached. A data file deleted by the cleaner may still be in
the middle of a read in another thread; its fd is only closed once no read is
in progress (an unlinked file stays readable through an open fd on POSIX).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from relaymq_kahadb.journal.checksum import crc32
from relaymq_kahadb.journal.files import data_path
from relaymq_kahadb.journal.records import MSG_PREFIX
from relaymq_kahadb.journal.writer import JournalWriter

log = logging.getLogger("relaymq.kahadb.journal")

_PREFIX: Final = struct.Struct(">II")
#: Read neighbours together when the gap between them is at most this.
_GAP: Final = 64 << 10
#: ...and the whole span at most this.
_SPAN: Final = 4 << 20
_MAX_FDS: Final = 128


class ChecksumError(ValueError):
    """A stored message whose bytes no longer match their checksum."""


class JournalReader:
    def __init__(self, directory: Path, writer: JournalWriter | None = None,
                 verify: bool = True) -> None:
        self.directory = directory
        self.writer = writer
        self.verify = verify
        #: file id -> path for files living elsewhere (quarantine, during salvage).
        self.paths: dict[int, Path] = {}
        self._fds: OrderedDict[int, int] = OrderedDict()
        self._lock = threading.Lock()
        self._active = 0
        self._retired: list[int] = []

    def read(self, locs: Sequence[tuple[int, int, int]]) -> list[bytes | None]:
        """Bytes for each (file, offset, length); None where the checksum or the
        stored length does not match (the caller reports it). Blocking."""
        with self._lock:
            self._active += 1
        try:
            return self._read(locs)
        finally:
            with self._lock:
                self._active -= 1
                if not self._active and self._retired:
                    for fd in self._retired:
                        os.close(fd)
                    self._retired.clear()

    def _read(self, locs: Sequence[tuple[int, int, int]]) -> list[bytes | None]:
        out: list[bytes | None] = [None] * len(locs)
        order = sorted(range(len(locs)), key=lambda i: (locs[i][0], locs[i][1]))
        k = 0
        n = len(order)
        while k < n:
            f, off, ln = locs[order[k]]
            start = off - MSG_PREFIX
            end = off + ln
            j = k + 1
            while j < n:
                f2, off2, ln2 = locs[order[j]]
                if f2 != f or off2 - MSG_PREFIX - end > _GAP or off2 + ln2 - start > _SPAN:
                    break
                end = max(end, off2 + ln2)
                j += 1
            if self.writer is not None:
                self.writer.wait_written(f, end)
            data = os.pread(self._fd(f), end - start, start)
            for i in order[k:j]:
                _, o, ln_i = locs[i]
                rel = o - MSG_PREFIX - start
                if rel + MSG_PREFIX + ln_i > len(data):
                    continue
                crc, stored = _PREFIX.unpack_from(data, rel)
                msg = data[rel + MSG_PREFIX:rel + MSG_PREFIX + ln_i]
                if stored != ln_i or (self.verify and crc and crc32(msg) != crc):
                    continue
                out[i] = msg
            k = j
        return out

    def read_span(self, file_id: int, start: int, length: int) -> bytes:
        """Raw bytes of a data file (ack compaction re-reads records)."""
        with self._lock:
            self._active += 1
        try:
            return os.pread(self._fd(file_id), length, start)
        finally:
            with self._lock:
                self._active -= 1

    def _fd(self, file_id: int) -> int:
        with self._lock:
            fd = self._fds.get(file_id)
            if fd is not None:
                self._fds.move_to_end(file_id)
                return fd
            path = self.paths.get(file_id) or data_path(self.directory, file_id)
            fd = os.open(path, os.O_RDONLY)
            self._fds[file_id] = fd
            while len(self._fds) > _MAX_FDS:
                _, old = self._fds.popitem(last=False)
                self._retired.append(old)
            return fd

    def retire(self, file_id: int) -> None:
        """Forget `file_id` (deleted or moved); its fd closes when no read uses it."""
        with self._lock:
            fd = self._fds.pop(file_id, None)
            if fd is not None:
                if self._active:
                    self._retired.append(fd)
                else:
                    os.close(fd)
            self.paths.pop(file_id, None)

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            for fd in self._retired:
                os.close(fd)
            self._retired.clear()
