"""Slowing down repeated failed logins from one address, and only from it.

Logins from one host run one at a time; after `free` failures in a row each
further attempt from that host first waits `base * 2**(n - free)` seconds (at
most `ceiling`). Other hosts never wait for it, and clients already connected
from the host are not affected: only new logins are. A success or
`forget_after` seconds without a failure clears the host's count.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class _Host:
    __slots__ = ("lock", "failures", "last", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.failures = 0
        self.last = 0.0
        self.users = 0  # attempts holding or waiting for the lock


class LoginThrottle:
    def __init__(self, *, free: int = 3, base: float = 0.05, ceiling: float = 2.0,
                 forget_after: float = 300.0, max_hosts: int = 10_000) -> None:
        self.free, self.base, self.ceiling = free, base, ceiling
        self.forget_after = forget_after
        self.max_hosts = max_hosts
        self._hosts: OrderedDict[str, _Host] = OrderedDict()

    def delay(self, host: str) -> float:
        h = self._hosts.get(host)
        if h is None or h.failures < self.free:
            return 0.0
        if time.monotonic() - h.last > self.forget_after:
            h.failures = 0
            return 0.0
        return min(self.ceiling, self.base * 2 ** (h.failures - self.free))

    def failures(self, host: str) -> int:
        h = self._hosts.get(host)
        return h.failures if h is not None else 0

    @asynccontextmanager
    async def turn(self, host: str | None) -> AsyncIterator[None]:
        """Wait for this host's turn (and its penalty), then run one login."""
        if host is None:
            yield
            return
        h = self._hosts.get(host)
        if h is None:
            h = self._hosts[host] = _Host()
            self._trim()
        else:
            self._hosts.move_to_end(host)
        h.users += 1
        try:
            async with h.lock:
                wait = self.delay(host)
                if wait:
                    await asyncio.sleep(wait)
                yield
        finally:
            h.users -= 1

    def failed(self, host: str | None) -> None:
        h = self._hosts.get(host) if host is not None else None
        if h is not None:
            h.failures += 1
            h.last = time.monotonic()

    def succeeded(self, host: str | None) -> None:
        h = self._hosts.get(host) if host is not None else None
        if h is not None:
            h.failures = 0

    def _trim(self) -> None:
        """Forget the least recently seen idle hosts beyond `max_hosts`."""
        excess = len(self._hosts) - self.max_hosts
        if excess <= 0:
            return
        for key in list(self._hosts):
            if excess <= 0:
                break
            if self._hosts[key].users == 0:
                del self._hosts[key]
                excess -= 1


def host_of(remote_address: str | None) -> str | None:
    """``10.0.0.7:5123`` -> ``10.0.0.7`` (``[::1]:5123`` -> ``[::1]``)."""
    if not remote_address:
        return None
    if remote_address.count(":") > 1 and not remote_address.startswith("["):
        return remote_address  # a bare IPv6 address, no port
    host, sep, port = remote_address.rpartition(":")
    return host if sep and port.isdigit() else remote_address
