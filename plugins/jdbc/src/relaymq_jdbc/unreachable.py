"""A database that cannot be reached: its error in one line, and waiting for it.

The brokers of a shared-store master/slave pair keep trying while the database
is down or restarting (as ActiveMQ's lockers do): a slave waiting for the lease,
and a broker started before its database, retry every
`lockAcquireSleepInterval` instead of exiting, and log each new error once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa

log = logging.getLogger("relaymq.jdbc")

T = TypeVar("T")

def short_error(exc: BaseException) -> str:
    """The driver's own first line, without SQLAlchemy's SQL echo and links."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def unreachable(exc: BaseException) -> bool:
    """`exc` says the database server cannot be reached now (refused, down,
    restarting, shutting down), not that it refused us (credentials, a database
    that does not exist) or a local file (SQLite) cannot be used."""
    if not isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)):
        return False
    orig = getattr(exc, "orig", None)
    if orig is None or type(orig).__module__.startswith("sqlite3"):
        return False
    state = getattr(orig, "sqlstate", None)
    if state is not None:
        # a connection exception (08...), or the server going away or starting up
        # (57P01..57P05)
        return str(state).startswith(("08", "57P"))
    # a failed connect carries the server's words, if it answered: FATAL is a
    # refusal (a role or database that does not exist, a wrong password), unless it
    # says the server is starting, stopping or recovering
    text = str(orig)
    if "FATAL" not in text:
        return True  # refused, timed out, no route: nobody answered
    return any(words in text for words in _GOING_AWAY)


#: what PostgreSQL says while it starts, stops or recovers
_GOING_AWAY = ("the database system is starting up", "the database system is shutting down",
               "terminating connection", "the database system is in recovery mode",
               "the database system is not yet accepting connections")


class DatabaseWait:
    def __init__(self, what: str, interval_ms: int) -> None:
        self.what = what
        self.interval_ms = max(int(interval_ms), 100)
        self.last: str | None = None

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread, again after each interval while the
        database cannot be reached."""
        while True:
            try:
                result = await asyncio.to_thread(fn, *args)
            except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
                if not unreachable(exc):
                    raise
                text = short_error(exc)
                if text != self.last:
                    log.warning("the database of the JDBC store %s cannot be reached (%s): "
                                "waiting for it, retrying every %d ms", self.what, text,
                                self.interval_ms)
                    self.last = text
                await asyncio.sleep(self.interval_ms / 1000)
                continue
            if self.last is not None:
                log.info("the database of the JDBC store %s answers again", self.what)
                self.last = None
            return result
