"""`systemUsage`: memory, store and temp limits that slow or refuse producers."""

from __future__ import annotations

import asyncio
import os

from relaymq.config.model import SystemUsageConfig, UsageLimit


def machine_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 << 30


def resolve_limit(limit: UsageLimit, default: int) -> int:
    """`percentOfJvmHeap` is read as a percentage of the machine's memory."""
    if limit.percent_of_jvm_heap:
        return machine_memory() * limit.percent_of_jvm_heap // 100
    return limit.limit if limit.limit else default


class Usage:
    """A byte counter with a limit; producers wait on `wait()` while it is full."""

    __slots__ = ("name", "limit", "used", "waiters")

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.used = 0
        self.waiters: list[asyncio.Future[None]] = []

    def add(self, n: int) -> None:
        self.used += n

    def sub(self, n: int) -> None:
        self.used -= n
        if self.waiters and self.used < self.limit:
            waiters, self.waiters = self.waiters, []
            for f in waiters:
                if not f.done():
                    f.set_result(None)

    @property
    def full(self) -> bool:
        return self.used >= self.limit

    @property
    def percent(self) -> int:
        return int(self.used * 100 / self.limit) if self.limit else 0

    async def wait(self) -> None:
        while self.used >= self.limit:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.waiters.append(fut)
            await fut


class SystemUsage:
    def __init__(self, config: SystemUsageConfig) -> None:
        self.config = config
        self.memory = Usage("memoryUsage", resolve_limit(config.memory, 1 << 30))
        self.store_limit = resolve_limit(config.store, 100 << 30)
        self.temp_limit = resolve_limit(config.temp, 50 << 30)
        self.send_fail_if_no_space = config.send_fail_if_no_space
        self.send_fail_timeout = config.send_fail_if_no_space_after_timeout / 1000.0
