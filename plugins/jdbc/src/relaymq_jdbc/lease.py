"""`lease-database-locker`: one master per database, by a lease row.

The master holds row ``ID = 1`` of ``ACTIVEMQ_LOCK``: ``BROKER_NAME`` is its
holder id and ``TIME`` the moment (database clock, ms) its lease ends. It renews
every `keep_alive` ms; the lease lasts `lease` ms (the locker's
lockAcquireSleepInterval, as ActiveMQ). A broker that finds the lease held by a
live holder is a slave: it logs who holds it and tries again every
lockAcquireSleepInterval, and takes the row when ``TIME`` has passed.

No split brain: every store transaction of the master first checks, inside the
same transaction and with a share lock on the row, that it still holds an
unexpired lease (`LeaseCheck`), so nothing is committed once a slave could have
taken over; and a master that cannot renew before its lease ends declares the
lease lost and stops serving. All times come from the database's clock, so
clock skew between the brokers does not matter.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from relaymq.errors import RelayMQError

from relaymq_jdbc.engines import db_now_ms
from relaymq_jdbc.schema import Schema
from relaymq_jdbc.unreachable import DatabaseWait, short_error

log = logging.getLogger("relaymq.jdbc")


class LeaseLost(RelayMQError):
    """This broker no longer holds the store's lease; it must stop serving."""


class StoreLocked(RuntimeError):
    """Another broker holds the lease and failIfLocked is set."""


def default_holder(broker_name: str) -> str:
    return f"{broker_name}@{socket.gethostname()}:{os.getpid()}"


class LeaseLocker:
    def __init__(self, engine: sa.Engine, schema: Schema, holder: str, *, lease_ms: int,
                 keep_alive_ms: int, acquire_ms: int, max_diff_ms: int = 0) -> None:
        self.engine = engine
        self.t = schema.lock
        self.holder = holder
        self.lease_ms = lease_ms
        self.keep_alive_ms = keep_alive_ms
        self.acquire_ms = acquire_ms
        self.max_diff_ms = max_diff_ms
        self.now = db_now_ms(engine.dialect.name)
        self._check_sql: tuple[str, Any] | None = None
        #: local monotonic time until which our lease is certainly valid
        self.valid_until = 0.0
        self.held = False
        self.lost: str | None = None

    # -- blocking parts (worker threads) -------------------------------------

    def _ensure_row(self) -> None:
        with self.engine.begin() as conn:
            if conn.execute(sa.select(self.t.c.ID).where(self.t.c.ID == 1)).first() is None:
                conn.execute(self.t.insert().values(ID=1, TIME=0, BROKER_NAME=None))

    def check_clock(self) -> int:
        """Difference database clock - local clock (ms); logged when over the limit."""
        with self.engine.connect() as conn:
            db = int(conn.execute(sa.select(self.now)).scalar_one())
        diff = db - int(time.time() * 1000)
        if self.max_diff_ms and abs(diff) > self.max_diff_ms:
            log.warning("the database clock differs from this host's by %d ms (more than "
                        "maxAllowableDiffFromDBTime=%d); leases use the database's clock",
                        diff, self.max_diff_ms)
        return diff

    def try_acquire(self) -> tuple[bool, str | None, int]:
        """One attempt: (acquired, current holder, ms until its lease ends)."""
        started = time.monotonic()
        try:
            with self.engine.begin() as conn:
                res = conn.execute(
                    self.t.update()
                    .where(self.t.c.ID == 1)
                    .where(sa.or_(self.t.c.BROKER_NAME.is_(None), self.t.c.TIME < self.now))
                    .values(BROKER_NAME=self.holder, TIME=self.now + self.lease_ms))
                if res.rowcount == 1:
                    self._renewed(started)
                    return True, self.holder, self.lease_ms
                row = conn.execute(sa.select(self.t.c.BROKER_NAME, self.t.c.TIME - self.now)
                                   .where(self.t.c.ID == 1)).first()
        except sa.exc.IntegrityError:  # pragma: no cover - the row raced into existence
            return False, None, 0
        if row is None:
            self._ensure_row()
            return self.try_acquire()
        return False, row[0], int(row[1] or 0)

    def renew(self) -> None:
        """Extend the lease; raises LeaseLost when it is no longer ours."""
        started = time.monotonic()
        with self.engine.begin() as conn:
            res = conn.execute(
                self.t.update()
                .where(self.t.c.ID == 1, self.t.c.BROKER_NAME == self.holder,
                       self.t.c.TIME > self.now)
                .values(TIME=self.now + self.lease_ms))
            if res.rowcount != 1:
                row = conn.execute(sa.select(self.t.c.BROKER_NAME).where(self.t.c.ID == 1)).first()
                who = row[0] if row is not None else None
                raise LeaseLost(f"the lease expired before it was renewed"
                                f"{f' and {who} holds it now' if who and who != self.holder else ''}")
        self._renewed(started)

    def _renewed(self, started: float) -> None:
        # the lease runs lease_ms from some moment after `started`: valid until at
        # least started + lease, less a margin for the time a commit takes to land
        self.valid_until = started + self.lease_ms / 1000 * 0.9
        self.held = True

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        with self.engine.begin() as conn:
            conn.execute(self.t.update().where(self.t.c.ID == 1, self.t.c.BROKER_NAME == self.holder)
                         .values(BROKER_NAME=None, TIME=0))

    def check(self, conn: sa.Connection) -> None:
        """Inside a store transaction: raise LeaseLost unless we hold a live lease.
        The share lock keeps a slave from taking the row until this transaction ends."""
        if self.lost is not None:
            raise LeaseLost(self.lost)
        check = self._check_sql
        if check is None:  # compiled once: it runs at the start of every store transaction
            q = (sa.select(self.t.c.ID)
                 .where(self.t.c.ID == 1, self.t.c.BROKER_NAME == self.holder,
                        self.t.c.TIME > self.now)
                 .with_for_update(read=True))
            check = self._check_sql = driver_sql(q, conn.dialect)
        if conn.exec_driver_sql(*check).first() is None:
            raise LeaseLost("the lease expired or was taken by another broker")

    # -- asyncio parts ---------------------------------------------------------

    async def acquire(self, *, fail_if_locked: bool, what: str,
                      waiting: Callable[[str], None] | None = None) -> None:
        """Become master: take the lease now or, as a slave, when it expires
        (`waiting(why)` is called once when this broker starts waiting)."""
        db = DatabaseWait(what, self.acquire_ms)  # a database that is down is waited for
        await db.call(self._ensure_row)
        await db.call(self.check_clock)
        announced = False
        while True:
            ok, holder, remaining = await db.call(self.try_acquire)
            if ok:
                if announced:
                    log.info("acquired the lease on %s as %s: this broker is now the master",
                             what, self.holder)
                else:
                    log.info("acquired the lease on %s as %s", what, self.holder)
                return
            if fail_if_locked:
                raise StoreLocked(
                    f"the JDBC store {what} is locked by {holder} (lease ends in "
                    f"{max(remaining, 0)} ms); stop that broker, or remove failIfLocked so this "
                    "broker waits as a slave")
            if not announced:
                log.warning("the JDBC store %s is locked by %s (lease ends in %d ms): this broker "
                            "is a slave and waits for the lease, retrying every %d ms",
                            what, holder, max(remaining, 0), self.acquire_ms)
                announced = True
                if waiting is not None:
                    waiting(f"the JDBC store {what} is locked by {holder}")
            await asyncio.sleep(self.acquire_ms / 1000)

    async def keep_alive(self, on_lost: Callable[[str], None]) -> None:
        """Renew every keep-alive period until cancelled; on loss call `on_lost` once."""
        while True:
            await asyncio.sleep(self.keep_alive_ms / 1000)
            try:
                await asyncio.wait_for(asyncio.to_thread(self.renew),
                                       max(0.05, self.valid_until - time.monotonic()))
            except TimeoutError:
                self._lose("the database did not answer the lease renewal before the lease "
                           "ends", on_lost)
                return
            except LeaseLost as exc:
                self._lose(str(exc), on_lost)
                return
            except Exception as exc:  # noqa: BLE001 - database trouble: retry until the lease ends
                if time.monotonic() + self.keep_alive_ms / 1000 >= self.valid_until:
                    self._lose(f"the lease could not be renewed before it ends ({exc})", on_lost)
                    return
                log.warning("renewing the store lease failed (%s); retrying", short_error(exc))

    def _lose(self, reason: str, on_lost: Callable[[str], None]) -> None:
        self.lost = reason
        self.held = False
        on_lost(reason)


def driver_sql(statement: sa.Select[Any], dialect: sa.Dialect) -> tuple[str, Any]:
    """`statement` compiled once for `dialect`: (SQL text, parameters) in the driver's
    own parameter style, for `Connection.exec_driver_sql` (no SQLAlchemy compilation
    or cache lookup per execution)."""
    compiled = statement.compile(dialect=dialect)
    params = compiled.params
    if compiled.positiontup is not None:
        return compiled.string, tuple(params[k] for k in compiled.positiontup)
    return compiled.string, dict(params)
