"""The writer thread: group commit of store batches into database transactions.

`write()` calls on the event loop turn their operations into rows (`prepare`)
and queue them here; the thread takes everything queued (up to `max_ops`
operations), applies it in ONE transaction and completes every caller's future
with one hop back to the loop. Under concurrent producers a commit carries
many batches, so throughput is the database's commit rate times the batch size,
and the event loop never waits for the database.

Per-key state (last sequence, live count and bytes, declared, subscription
options) is kept in ``RELAYMQ_KEYS`` in the same transaction as the rows, and
mirrored in memory twice: the thread's own copy (to write the next
transaction) and the loop's copy (for `stats()` and `size()`), updated by the
same callback that completes the futures, so a completed write is visible.

A failed transaction is retried batch by batch, so one bad batch (a name too
long for its column) fails only its own producer. The lease check
(`LeaseLocker.check`) opens every transaction.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from relaymq.errors import RelayMQError
from relaymq.errors import StoreWriteError as KernelStoreWriteError
from relaymq.failures import RepeatedFailures
from relaymq.model.codec import encode_message
from relaymq.spi.persistence import (
    AddDestination,
    AddDuplicateId,
    AddMessage,
    AddSubscription,
    RemoveDestination,
    RemoveDuplicateId,
    RemoveMessage,
    RemoveSubscription,
    StoreOp,
)

from relaymq_jdbc.lease import LeaseLocker, LeaseLost
from relaymq_jdbc.schema import Schema
from relaymq_jdbc.txlock import TransactionLocker
from relaymq_jdbc.unreachable import short_error

log = logging.getLogger("relaymq.jdbc")

#: The message columns the writer inserts, in the order of its row tuples.
MSG_COLUMNS = ("ID", "CONTAINER", "SEQ", "MSGID_PROD", "MSGID_SEQ", "EXPIRATION", "MSG", "PRIORITY")
_MSG = MSG_COLUMNS.index("MSG")

#: Most sequence numbers in one DELETE ... IN (...) statement.
DELETE_CHUNK = 500


@dataclass(slots=True)
class KeyState:
    """One row of RELAYMQ_KEYS."""

    declared: bool = False
    last_seq: int = 0
    count: int = 0
    nbytes: int = 0
    options: str | None = None
    in_db: bool = False


# Prepared operations (tuples: cheap to build on the loop, read in the thread).
ADD, REMOVE, DECLARE, DROP, SUBSCRIBE, UNSUBSCRIBE, EXPIRE, ADD_DUP, REMOVE_DUP = range(9)
Prepared = tuple[Any, ...]


def _msgid_parts(message_id: str | None) -> tuple[str | None, int]:
    """ActiveMQ splits `ID:host-1-2:3:1:1:5` into producer id and producer sequence."""
    if not message_id:
        return None, 0
    prod, _, seq = message_id.rpartition(":")
    if prod and seq.isdigit():
        return prod[:250], int(seq)
    return message_id[:250], 0


def _add(dest: str, seq: int, m: Any) -> Prepared:
    """A message's operation; its row is a list in MSG_COLUMNS order whose ID the
    writer fills in (so the writer builds no second tuple per row)."""
    prod, pseq = _msgid_parts(m.message_id)
    return (ADD, dest, seq, [0, dest, seq, prod, pseq, m.expiration, encode_message(m),
                             m.priority])


def prepare(ops: Sequence[StoreOp]) -> list[Prepared]:
    """Kernel operations -> rows, on the event loop (the message is encoded here,
    where it is owned)."""
    out: list[Prepared] = []
    append = out.append
    for op in ops:
        kind = type(op)  # the two per-message operations first, without isinstance
        if kind is AddMessage:
            append(_add(op.dest, op.seq, op.message))  # type: ignore[union-attr]
        elif kind is RemoveMessage:
            append((REMOVE, op.dest, op.seq))  # type: ignore[union-attr]
        else:
            append(_prepare_other(op))
    return out


def _prepare_other(op: StoreOp) -> Prepared:
    if isinstance(op, AddMessage):
        return _add(op.dest, op.seq, op.message)
    if isinstance(op, RemoveMessage):
        return (REMOVE, op.dest, op.seq)
    if isinstance(op, AddDestination):
        return (DECLARE, op.dest)
    if isinstance(op, RemoveDestination):
        return (DROP, op.dest)
    if isinstance(op, AddSubscription):
        r = op.record
        options = json.dumps({"no_local": r.no_local, "extra": r.extra}, sort_keys=True)
        return (SUBSCRIBE, r.key, {
            "CONTAINER": r.topic, "SUB_DEST": r.key, "CLIENT_ID": r.client_id,
            "SUB_NAME": r.name, "SELECTOR": r.selector, "LAST_ACKED_ID": 0, "PRIORITY": 5},
            options)
    if isinstance(op, RemoveSubscription):
        return (UNSUBSCRIBE, op.key)
    if isinstance(op, AddDuplicateId):
        return (ADD_DUP, op.address, op.seq, op.dup_id)
    if isinstance(op, RemoveDuplicateId):
        return (REMOVE_DUP, op.address, op.seq)
    raise TypeError(f"unknown store operation {op!r}")  # pragma: no cover - a new op type


class StoreWriteError(KernelStoreWriteError):
    """A store transaction failed (connection lost, disk full, deadlock, a value too
    long for its column): the sends and acks in it were not stored."""


class _Item:
    __slots__ = ("ops", "future")

    def __init__(self, ops: list[Prepared], future: asyncio.Future[None] | None) -> None:
        self.ops = ops
        self.future = future


#: upper bounds (seconds) of the commit latency histogram's buckets (+Inf after)
COMMIT_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: upper bounds of the store-writes-per-transaction histogram's buckets (+Inf after)
BATCH_BOUNDS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0)


class WriterStats:
    """Group-commit counters (written by the writer thread, read for monitoring).
    A commit is the JDBC store's durable write (the database syncs its log), a
    batch the producers' store writes one transaction carries."""

    __slots__ = ("commits", "batches", "ops", "failures", "commit_seconds", "commit_buckets",
                 "batch_buckets")

    def __init__(self) -> None:
        self.commits = self.batches = self.ops = self.failures = 0
        self.commit_seconds = 0.0
        self.commit_buckets = [0] * (len(COMMIT_BOUNDS) + 1)
        self.batch_buckets = [0] * (len(BATCH_BOUNDS) + 1)

    def batches_per_commit(self) -> float:
        return self.batches / self.commits if self.commits else 0.0

    def add_commit(self, seconds: float, writes: int) -> None:
        self.commits += 1
        self.batches += writes
        self.commit_seconds += seconds
        self.commit_buckets[bisect.bisect_left(COMMIT_BOUNDS, seconds)] += 1
        self.batch_buckets[bisect.bisect_left(BATCH_BOUNDS, float(writes))] += 1


class GroupWriter:
    def __init__(self, engine: sa.Engine, schema: Schema, state: dict[str, KeyState],
                 next_id: int, lease: LeaseLocker | TransactionLocker | None, loop: asyncio.AbstractEventLoop,
                 apply_view: Callable[[dict[str, KeyState]], None], max_ops: int) -> None:
        self.engine = engine
        self.s = schema
        self.state = state
        self.next_id = next_id
        self.lease = lease
        self.loop = loop
        self.apply_view = apply_view
        self.max_ops = max_ops
        self.stats = WriterStats()
        self._queue: collections.deque[_Item] = collections.deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._conn: sa.Connection | None = None
        #: why transactions failed since one last succeeded: each reason is logged
        #: once while they keep failing (a database that is down, a disk that refuses
        #: writes, fails every write a client or a mirror source tries again)
        self._failures = RepeatedFailures()
        self._thread = threading.Thread(target=self._run, name="relaymq-jdbc-writer", daemon=True)
        t = schema.msgs
        k = schema.keys
        self._msg_len = sa.func.length(t.c.MSG)
        # the per-commit statements as driver SQL: no SQLAlchemy compilation per commit
        self._insert_sql = _insert_sql(engine, t)
        self._pg_insert_sql = (_pg_insert_sql(engine, t) if engine.dialect.name == "postgresql"
                               else None)
        self._key_update_sql = _key_update_sql(engine, k)
        self._delete_sql = _DeleteSQL(engine, t)

    # -- loop side --------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def submit(self, ops: list[Prepared], future: asyncio.Future[None] | None) -> None:
        with self._cond:
            if self._stopping:
                raise RuntimeError("the JDBC store is stopping")
            self._queue.append(_Item(ops, future))
            self._cond.notify()

    def stop(self) -> None:
        """Blocking: finish what is queued, then end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()

    # -- thread side --------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    break
                items = [self._queue.popleft()]
                n = len(items[0].ops)
                while self._queue and n + len(self._queue[0].ops) <= self.max_ops:
                    item = self._queue.popleft()
                    items.append(item)
                    n += len(item.ops)
            self._commit(items)
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
            self._conn = None

    def _connection(self) -> sa.Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.engine.connect()
        return self._conn

    def _commit(self, items: list[_Item]) -> None:
        started = time.perf_counter()
        try:
            pending, next_id = self._transaction([op for it in items for op in it.ops])
        except Exception as exc:  # noqa: BLE001 - handed to the producers
            self._drop_connection()
            if len(items) > 1 and not isinstance(exc, LeaseLost):
                for it in items:  # isolate the batch that fails
                    self._commit([it])
                return
            self.stats.failures += 1
            if not isinstance(exc, RelayMQError):
                err = StoreWriteError(f"the JDBC store could not store this: {short_error(exc)}")
                err.__cause__ = exc
                exc = err
            reason = str(exc)
            if not self._failures.failed(reason):
                log.debug("JDBC store: a transaction failed again (%s)", reason)
            else:
                log.error("JDBC store: a transaction failed and was not stored (%s); the "
                          "producers get the error (logged once while transactions keep "
                          "failing so)", reason)
            self._finish(items, None, exc)
            return
        if self._failures.count:
            self._failures.succeeded()  # stored again: a failure after this is news
        self.next_id = next_id
        self.state.update(pending)
        self.stats.add_commit(time.perf_counter() - started, len(items))
        self.stats.ops += sum(len(it.ops) for it in items)
        view = {k: dataclasses.replace(v) for k, v in pending.items()}
        self._finish(items, view, None)

    def _drop_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.invalidate()
                self._conn.close()
            except Exception:  # noqa: BLE001
                pass
            self._conn = None

    def _finish(self, items: list[_Item], view: dict[str, KeyState] | None,
                exc: BaseException | None) -> None:
        futures = [it.future for it in items if it.future is not None]
        try:
            self.loop.call_soon_threadsafe(_complete, futures, view, exc, self.apply_view)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _transaction(self, ops: list[Prepared], *,
                     reconnect: bool = True) -> tuple[dict[str, KeyState], int]:
        """`ops` in one transaction. The writer keeps its connection between
        transactions; when the database dropped it meanwhile (a restart,
        `pg_terminate_backend`, a closed idle connection), the statements fail before
        anything is committed and the transaction runs once more on a new connection.
        A failure at COMMIT is not retried: the database may have committed it."""
        conn = self._connection()  # a failure to connect is not retried
        applied = False
        try:
            with conn.begin():
                if self.lease is not None:
                    self.lease.check(conn)
                result = self._apply(conn, ops)
                applied = True  # what fails from here on is the COMMIT
        except sa.exc.DBAPIError as exc:
            if applied or not reconnect or not exc.connection_invalidated:
                raise
            log.warning("JDBC store: the database closed the store's connection (%s); "
                        "writing on a new one", short_error(exc))
            self._drop_connection()
            return self._transaction(ops, reconnect=False)
        return result

    def _apply(self, conn: sa.Connection, ops: list[Prepared]) -> tuple[dict[str, KeyState], int]:
        s = self.s
        msgs = s.msgs
        pending: dict[str, KeyState] = {}
        state = self.state
        next_id = self.next_id
        adds: list[list[Any] | None] = []
        added: dict[tuple[str, int], int] = {}
        removes: dict[str, list[int]] = {}
        dup_adds: dict[tuple[str, int], bytes] = {}
        dup_removes: dict[str, list[int]] = {}
        dups = s.dups

        def key(name: str) -> KeyState:
            st = pending.get(name)
            if st is None:
                old = state.get(name)
                st = pending[name] = dataclasses.replace(old) if old is not None else KeyState()
            return st

        def flush() -> None:
            rows = [r for r in adds if r is not None]
            if rows and self._pg_insert_sql is not None:
                # one statement whose columns are arrays (dumped by psycopg in C), instead
                # of one pipelined statement per row
                columns = tuple(list(c) for c in zip(*rows, strict=True))
                conn.exec_driver_sql(self._pg_insert_sql, columns)
            elif rows:  # the driver's own executemany on the transaction's connection:
                # no per-row (or per-call) work in SQLAlchemy, and the rows stay lists
                cur = conn.connection.cursor()
                try:
                    cur.executemany(self._insert_sql, rows)
                finally:
                    cur.close()
            adds.clear()
            added.clear()
            delete = self._delete_sql
            for dest, seqs in removes.items():
                st = key(dest)
                for sql, params in delete.statements(dest, seqs):
                    sizes = conn.exec_driver_sql(sql, params).scalars().all()
                    st.count -= len(sizes)
                    st.nbytes -= sum(n or 0 for n in sizes)
            removes.clear()
            if dup_adds:
                conn.execute(dups.insert(), [{"ADDRESS": a, "SEQ": q, "DUP_ID": d}
                                             for (a, q), d in dup_adds.items()])
                dup_adds.clear()
            for address, seqs in dup_removes.items():
                for i in range(0, len(seqs), DELETE_CHUNK):
                    conn.execute(dups.delete().where(dups.c.ADDRESS == address,
                                                     dups.c.SEQ.in_(seqs[i:i + DELETE_CHUNK])))
            dup_removes.clear()

        # the state of the destination of the previous ADD: messages come in runs of one
        # destination, so most ADDs skip the lookup
        last_dest: str | None = None
        last_st = KeyState()
        for op in ops:
            kind = op[0]
            if kind == ADD:
                _, dest, seq, row = op
                if dest is last_dest:
                    st = last_st
                else:
                    st = last_st = key(dest)
                    last_dest = dest
                    if not st.declared and not dest.startswith("durable://"):
                        st.declared = True
                row[0] = next_id
                next_id += 1
                added[(dest, seq)] = len(adds)
                adds.append(row)
                if seq > st.last_seq:
                    st.last_seq = seq
                st.count += 1
                st.nbytes += len(row[_MSG])
            elif kind == REMOVE:
                _, dest, seq = op
                i = added.pop((dest, seq), None)
                if i is not None and adds[i] is not None:
                    st = key(dest)
                    st.count -= 1
                    st.nbytes -= len(adds[i][_MSG])  # type: ignore[index]
                    adds[i] = None
                elif dest in state or dest in pending:
                    removes.setdefault(dest, []).append(seq)
            elif kind == DECLARE:
                key(op[1]).declared = True
            elif kind == DROP:
                flush()
                last_dest = None  # a later ADD declares it again
                dest = op[1]
                if dest in state or dest in pending:
                    conn.execute(msgs.delete().where(msgs.c.CONTAINER == dest))
                    st = key(dest)
                    st.declared, st.count, st.nbytes = False, 0, 0
            elif kind == SUBSCRIBE:
                _, name, row, options = op
                a = s.acks
                conn.execute(a.delete().where(a.c.CLIENT_ID == row["CLIENT_ID"],
                                              a.c.SUB_NAME == row["SUB_NAME"]))
                conn.execute(a.insert().values(**row))
                key(name).options = options
            elif kind == UNSUBSCRIBE:
                flush()
                name = op[1]
                a = s.acks
                conn.execute(a.delete().where(a.c.SUB_DEST == name))
                if name in state or name in pending:
                    conn.execute(msgs.delete().where(msgs.c.CONTAINER == name))
                    st = key(name)
                    st.options, st.count, st.nbytes = None, 0, 0
            elif kind == ADD_DUP:
                dup_adds[(op[1], op[2])] = op[3]
            elif kind == REMOVE_DUP:
                if dup_adds.pop((op[1], op[2]), None) is None:
                    dup_removes.setdefault(op[1], []).append(op[2])
            elif kind == EXPIRE:
                flush()
                res = conn.execute(msgs.delete()
                                   .where(msgs.c.EXPIRATION > 0, msgs.c.EXPIRATION < op[1])
                                   .returning(msgs.c.CONTAINER, self._msg_len))
                for dest, n in res:
                    st = key(dest)
                    st.count -= 1
                    st.nbytes -= int(n or 0)
        flush()
        updates = []
        inserts = []
        for name, st in pending.items():
            if st.in_db:
                updates.append((st.declared, st.last_seq, st.count, st.nbytes, st.options, name))
            else:
                inserts.append({"CONTAINER": name, "DECLARED": st.declared,
                                "LAST_SEQ": st.last_seq, "MSG_COUNT": st.count,
                                "MSG_BYTES": st.nbytes, "SUB_OPTIONS": st.options})
                st.in_db = True
        if updates:
            conn.exec_driver_sql(self._key_update_sql, updates)
        if inserts:
            conn.execute(s.keys.insert(), inserts)
        return pending, next_id


def _insert_sql(engine: sa.Engine, msgs: sa.Table) -> str:
    """`INSERT INTO ACTIVEMQ_MSGS (...) VALUES (?, ...)` in the driver's own parameter style."""
    q = engine.dialect.identifier_preparer
    mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    return (f"INSERT INTO {q.format_table(msgs)} ({', '.join(q.quote(c) for c in MSG_COLUMNS)}) "
            f"VALUES ({', '.join([mark] * len(MSG_COLUMNS))})")


#: PostgreSQL array types of MSG_COLUMNS, in order.
_PG_ARRAY_TYPES = ("bigint[]", "text[]", "bigint[]", "text[]", "bigint[]", "bigint[]", "bytea[]",
                   "bigint[]")


def _pg_insert_sql(engine: sa.Engine, msgs: sa.Table) -> str:
    """`INSERT INTO ACTIVEMQ_MSGS (...) SELECT * FROM unnest(%s::bigint[], ...)`: a whole
    group's messages as one statement with one array parameter per column."""
    q = engine.dialect.identifier_preparer
    arrays = ", ".join(f"%b::{t}" for t in _PG_ARRAY_TYPES)  # binary: bytes not hex-escaped
    return (f"INSERT INTO {q.format_table(msgs)} ({', '.join(q.quote(c) for c in MSG_COLUMNS)}) "
            f"SELECT * FROM unnest({arrays})")


def _key_update_sql(engine: sa.Engine, keys: sa.Table) -> str:
    """`UPDATE RELAYMQ_KEYS SET ... WHERE CONTAINER = ?` in the driver's parameter style;
    parameters (declared, last_seq, count, bytes, options, container)."""
    q = engine.dialect.identifier_preparer
    mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    sets = ", ".join(f"{q.quote(c)} = {mark}"
                     for c in ("DECLARED", "LAST_SEQ", "MSG_COUNT", "MSG_BYTES", "SUB_OPTIONS"))
    return f"UPDATE {q.format_table(keys)} SET {sets} WHERE {q.quote('CONTAINER')} = {mark}"


class _DeleteSQL:
    """Deleting acknowledged messages of one destination, returning their sizes.

    PostgreSQL plans `SEQ IN (...)` as a scan of the whole destination filtered by
    the list; joining an unnested array makes it one index lookup per sequence
    (one statement whatever the count). Elsewhere `SEQ IN (?, ...)` in chunks of
    at most DELETE_CHUNK, the statement text cached per chunk length."""

    def __init__(self, engine: sa.Engine, msgs: sa.Table) -> None:
        q = engine.dialect.identifier_preparer
        self.table = q.format_table(msgs)
        self.container = q.quote("CONTAINER")
        self.seq = q.quote("SEQ")
        self.msg = q.quote("MSG")
        self.pg = engine.dialect.name == "postgresql"
        self.mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        self._by_len: dict[int, str] = {}
        self.pg_sql = (f"DELETE FROM {self.table} AS m USING unnest(%s::bigint[]) AS u(s) "
                       f"WHERE m.{self.container} = %s AND m.{self.seq} = u.s "
                       f"RETURNING length(m.{self.msg})")

    def statements(self, dest: str, seqs: list[int]) -> list[tuple[str, tuple[Any, ...]]]:
        if self.pg:
            return [(self.pg_sql, (seqs, dest))]
        out = []
        for i in range(0, len(seqs), DELETE_CHUNK):
            chunk = seqs[i:i + DELETE_CHUNK]
            sql = self._by_len.get(len(chunk))
            if sql is None:
                marks = ", ".join([self.mark] * len(chunk))
                sql = self._by_len[len(chunk)] = (
                    f"DELETE FROM {self.table} WHERE {self.container} = {self.mark} "
                    f"AND {self.seq} IN ({marks}) RETURNING length({self.msg})")
            out.append((sql, (dest, *chunk)))
        return out


def _complete(futures: list[asyncio.Future[None]], view: dict[str, KeyState] | None,
              exc: BaseException | None, apply_view: Callable[[dict[str, KeyState]], None]) -> None:
    if view is not None:
        apply_view(view)
    for f in futures:
        if f.done():
            continue
        if exc is None:
            f.set_result(None)
        else:
            f.set_exception(exc)
