"""The `lock` file: one broker per KahaDB directory.

An exclusive `fcntl.flock` on `<directory>/lock`, held for the life of the
store. The kernel drops it when the process dies, however it dies, so there is
no stale lock to clean up after a crash (unlike a pid file). The holder writes
who it is into the file, so the broker that is refused can say who holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

from relaymq_kahadb.errors import StoreLockedError

__all__ = ["DirectoryLock", "StoreLockedError"]

log = logging.getLogger("relaymq.kahadb")


class DirectoryLock:
    def __init__(self, directory: Path) -> None:
        self.path = directory / "lock"
        self._fd = -1
        #: the broker's name, written into the lock file with the pid and host
        self.owner = ""

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def try_acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        broker = f" broker={self.owner}" if self.owner else ""
        info = (f"pid={os.getpid()} host={socket.gethostname()}{broker} "
                f"since={time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n")
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.encode(), 0)
        self._fd = fd
        return True

    def lost(self) -> str | None:
        """Why the lock is no longer this store's (None while it is): the lock file
        was removed or replaced, so another broker may lock the new one."""
        if self._fd < 0:
            return "the lock is not held"
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return f"the lock file {self.path} was removed"
        except OSError as exc:
            return f"the lock file {self.path} cannot be checked: {exc}"
        mine = os.fstat(self._fd)
        if (now.st_ino, now.st_dev) != (mine.st_ino, mine.st_dev):
            return f"the lock file {self.path} was replaced (now: {self.holder()})"
        return None

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it (best effort)."""
        try:
            text = self.path.read_text().strip()
        except OSError:
            text = ""
        return text or "unknown holder"

    async def acquire(self, *, wait: bool, interval: float,
                      waiting: Callable[[str], None] | None = None) -> None:
        """Take the lock; fail at once or, with `wait`, retry every `interval` s
        (`waiting` is told who holds it when the wait starts)."""
        if self.try_acquire():
            return
        if not wait:
            raise StoreLockedError(
                f"KahaDB directory {self.path.parent} is locked by another broker "
                f"({self.holder()}). Stop that broker or give this one another directory; "
                f"for a shared-storage master/slave pair set failIfLocked=\"false\" (or give "
                f"<kahaDB> a <locker><shared-file-locker/></locker>) so this broker waits for the lock")
        log.warning("KahaDB directory %s is locked by %s: this broker is a slave and waits for "
                    "the lock, retrying every %.1f s", self.path.parent, self.holder(), interval)
        if waiting is not None:
            waiting(f"{self.path.parent} is locked by {self.holder()}")
        while not self.try_acquire():
            await asyncio.sleep(interval)
        log.warning("acquired the KahaDB lock on %s: this broker is now the master",
                    self.path.parent)

    def release(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = -1
