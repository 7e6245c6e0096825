"""`transaction-database-locker`: the master holds a row lock in a long-lived
transaction (PostgreSQL only).

As ActiveMQ's locker of that name: a connection of its own begins a transaction
and takes ``SELECT ... FROM ACTIVEMQ_LOCK WHERE ID = 1 FOR UPDATE``, and keeps
the transaction open for the life of the store. Another broker's
``SELECT ... FOR UPDATE NOWAIT`` fails while it is held: that broker is a slave
and tries again every lockAcquireSleepInterval. When the master's process dies
(kill -9 included) its connection closes, PostgreSQL ends the transaction and
the row lock is free at once: no lease to wait out.

Who holds the lock: the lock connection's ``application_name`` is
``relaymq-lock:<holder>``, which a slave reads from ``pg_stat_activity`` (an
uncommitted ``BROKER_NAME`` would be invisible to it).

Keep-alive: every lockKeepAlivePeriod the master updates the locked row's
``TIME`` inside the held transaction (as ActiveMQ's keepAlive does), which
proves the connection still works and keeps
``idle_in_transaction_session_timeout`` from ending it. If that fails the lock
is gone: the broker stops serving. Every store transaction (on the writer's own
connection) first checks that the lock connection's server process is still
there (`check`), so nothing is committed once a slave could hold the lock.

SQLite is refused: it has no row locks, and a transaction held open would lock
the whole database file against the master's own writer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import sqlalchemy as sa

from relaymq_jdbc.engines import db_now_ms
from relaymq_jdbc.lease import LeaseLost, StoreLocked
from relaymq_jdbc.schema import Schema
from relaymq_jdbc.unreachable import DatabaseWait

log = logging.getLogger("relaymq.jdbc")

APP_PREFIX = "relaymq-lock:"


class UnsupportedLocker(RuntimeError):
    """The locker cannot work on this database."""


class TransactionLocker:
    def __init__(self, engine: sa.Engine, schema: Schema, holder: str, *, keep_alive_ms: int,
                 acquire_ms: int) -> None:
        if engine.dialect.name != "postgresql":
            raise UnsupportedLocker(
                f"transaction-database-locker needs row locks (PostgreSQL); {engine.dialect.name} "
                "would lock the whole database with the held transaction, so the broker could "
                "not write; use <lease-database-locker> there")
        self.engine = engine
        self.t = schema.lock
        self.holder = holder
        self.keep_alive_ms = keep_alive_ms
        self.acquire_ms = acquire_ms
        self.now = db_now_ms("postgresql")
        self.held = False
        self.lost: str | None = None
        #: the lock connection's server process (PostgreSQL keeps 63 bytes of its name)
        self.backend_pid = 0
        self._conn: sa.Connection | None = None
        self._lock = threading.Lock()

    # -- blocking parts (worker threads) -----------------------------------------

    def _ensure_row(self) -> None:
        with self.engine.begin() as conn:
            if conn.execute(sa.select(self.t.c.ID).where(self.t.c.ID == 1)).first() is None:
                conn.execute(self.t.insert().values(ID=1, TIME=0, BROKER_NAME=None))

    def holder_now(self) -> str:
        """Who holds the row lock, from pg_stat_activity (best effort)."""
        with self.engine.connect() as conn:
            names = conn.execute(sa.text(
                "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name LIKE :p AND pid <> pg_backend_pid()"),
                {"p": APP_PREFIX + "%"}).scalars().all()
        found = [n.removeprefix(APP_PREFIX) for n in names]
        return ", ".join(found) if found else "another connection"

    def try_acquire(self) -> bool:
        """One attempt: take the row lock and keep its transaction open."""
        conn = self.engine.connect()
        try:
            conn.execute(sa.select(sa.func.set_config("application_name",
                                                      APP_PREFIX + self.holder[:50], False)))
            conn.commit()
            conn.begin()
            row = conn.execute(sa.select(self.t.c.ID).where(self.t.c.ID == 1)
                               .with_for_update(nowait=True)).first()
            if row is None:  # pragma: no cover - _ensure_row made it
                raise RuntimeError("ACTIVEMQ_LOCK has no row 1")
            conn.execute(self.t.update().where(self.t.c.ID == 1)
                         .values(BROKER_NAME=self.holder, TIME=self.now))
            self.backend_pid = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
        except sa.exc.OperationalError as exc:
            conn.invalidate()
            conn.close()
            if "could not obtain lock" in str(exc) or "55P03" in str(getattr(exc.orig, "sqlstate", "")):
                return False
            raise
        except BaseException:
            conn.invalidate()
            conn.close()
            raise
        with self._lock:
            self._conn = conn
            self.held = True
        return True

    def renew(self) -> None:
        """Touch the locked row inside the held transaction; LeaseLost if that fails."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise LeaseLost("the lock connection is closed")
            try:
                conn.execute(self.t.update().where(self.t.c.ID == 1).values(TIME=self.now))
            except Exception as exc:  # noqa: BLE001 - any failure means the transaction is gone
                raise LeaseLost(f"the lock connection failed ({exc.__class__.__name__}: "
                                f"{str(getattr(exc, 'orig', exc)).strip().splitlines()[0]}); "
                                "the row lock went with it") from None

    def release(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            self.held = False
        if conn is not None:
            try:
                conn.rollback()  # ends the transaction: the row lock is free
            finally:
                conn.close()

    def check(self, conn: sa.Connection) -> None:
        """Inside a store transaction: raise LeaseLost unless the lock connection's
        server process is still alive (and so still holds the row lock)."""
        if self.lost is not None:
            raise LeaseLost(self.lost)
        alive = conn.execute(sa.text("SELECT 1 FROM pg_stat_activity WHERE pid = :p"),
                             {"p": self.backend_pid}).first()
        if alive is None:
            raise LeaseLost("the connection holding the row lock is gone")

    # -- asyncio parts -------------------------------------------------------------

    async def acquire(self, *, fail_if_locked: bool, what: str,
                      waiting: Callable[[str], None] | None = None) -> None:
        db = DatabaseWait(what, self.acquire_ms)  # a database that is down is waited for
        await db.call(self._ensure_row)
        announced = False
        while True:
            if await db.call(self.try_acquire):
                log.info("took the row lock on %s as %s%s", what, self.holder,
                         ": this broker is now the master" if announced else "")
                return
            holder = await db.call(self.holder_now)
            if fail_if_locked:
                raise StoreLocked(
                    f"the JDBC store {what} is locked by {holder} (a row lock held in a "
                    "transaction); stop that broker, or remove failIfLocked so this broker "
                    "waits as a slave")
            if not announced:
                log.warning("the JDBC store %s is locked by %s (transaction-database-locker): "
                            "this broker is a slave and waits for the row lock, retrying every "
                            "%d ms", what, holder, self.acquire_ms)
                announced = True
                if waiting is not None:
                    waiting(f"the JDBC store {what} is locked by {holder}")
            await asyncio.sleep(self.acquire_ms / 1000)

    async def keep_alive(self, on_lost: Callable[[str], None]) -> None:
        """Touch the row every keep-alive period until cancelled; on loss call `on_lost`."""
        while True:
            await asyncio.sleep(self.keep_alive_ms / 1000)
            started = time.monotonic()
            try:
                await asyncio.wait_for(asyncio.to_thread(self.renew),
                                       max(1.0, 2 * self.keep_alive_ms / 1000))
            except TimeoutError:
                reason = (f"the lock connection did not answer for "
                          f"{time.monotonic() - started:.1f} s")
            except LeaseLost as exc:
                reason = str(exc)
            else:
                continue
            self.lost = reason
            self.held = False
            on_lost(reason)
            return
