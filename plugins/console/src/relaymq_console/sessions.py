"""Login sessions and CSRF tokens for the console (in memory, per broker process).

A session is an opaque random token in an `HttpOnly`, `SameSite=Strict` cookie;
every state-changing request made with a session must carry the session's CSRF
token (form field `csrf` or header `X-CSRF-Token`). Requests authenticated with
HTTP Basic (the CLI, scripts) carry no cookie and need no CSRF token.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

COOKIE = "relaymq_session"


@dataclass
class Session:
    principal: Any
    admin: bool
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    last_used: float = field(default_factory=time.monotonic)


class Sessions:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._by_token: dict[str, Session] = {}

    def create(self, principal: Any, admin: bool) -> tuple[str, Session]:
        self._expire()
        token = secrets.token_urlsafe(32)
        session = self._by_token[token] = Session(principal, admin)
        return token, session

    def get(self, token: str | None) -> Session | None:
        if not token:
            return None
        session = self._by_token.get(token)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.last_used > self.timeout:
            del self._by_token[token]
            return None
        session.last_used = now
        return session

    def drop(self, token: str | None) -> None:
        if token:
            self._by_token.pop(token, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for token in [t for t, s in self._by_token.items() if now - s.last_used > self.timeout]:
            del self._by_token[token]


@dataclass
class _Turns:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0  # attempts holding or waiting for the lock


class LoginThrottle:
    """At most `limit` failed logins per address per `window` seconds: once `limit`
    failures fall within the window, every login from the address is refused, the
    right password too, until the oldest of them leaves it. Logins from one address
    take `turn`s, so a concurrent burst is counted as if it came one by one."""

    def __init__(self, limit: int = 5, window: float = 60.0) -> None:
        self.limit, self.window = limit, window
        self._failures: dict[str, list[float]] = {}
        self._turns: dict[str, _Turns] = {}

    @asynccontextmanager
    async def turn(self, address: str) -> AsyncIterator[None]:
        """One login of `address` at a time: check `blocked` and evaluate the
        credentials inside, so no attempt starts before the one ahead has counted."""
        turns = self._turns.get(address)
        if turns is None:
            turns = self._turns[address] = _Turns()
        turns.waiting += 1
        try:
            async with turns.lock:
                yield
        finally:
            turns.waiting -= 1
            if not turns.waiting:
                del self._turns[address]

    def blocked(self, address: str) -> int:
        """Whole seconds until `address` may try again; 0 when it may now."""
        now = time.monotonic()
        recent = [t for t in self._failures.get(address, []) if now - t < self.window]
        if recent:
            self._failures[address] = recent
        else:
            self._failures.pop(address, None)
        if len(recent) < self.limit:
            return 0
        return max(1, math.ceil(recent[-self.limit] + self.window - now))

    def failed(self, address: str) -> None:
        self._failures.setdefault(address, []).append(time.monotonic())
