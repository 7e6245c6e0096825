"""`<jdbcPersistenceAdapter>`: the relational store, wired together.

Start-up: translate the data source to a SQLAlchemy URL (`datasource`), open
the engines (`engines`), create or check the tables (`schema`), take the lease
(`lease`; a slave waits here, before the broker opens any connector), load the
per-key state, start the group-commit writer thread (`writer`) and the
keep-alive and cleanup tasks. Reads and listings run in worker threads on
their own connections, after every write queued before them has committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from relaymq.config.report import Report, warn_once
from relaymq.errors import ConfigError, StartupError, StoreLockedError
from relaymq.model.codec import decode_message
from relaymq.spi.persistence import (
    DestinationStats,
    DuplicateIdRecord,
    LockState,
    PersistenceAdapter,
    StoredMessage,
    StoreOp,
    SubscriptionRecord,
)
from sqlalchemy.engine import URL

from relaymq_jdbc.config import LOCKERS, JDBCConfig, LockerConfig
from relaymq_jdbc.datasource import (
    DERBY_CLASSES,
    DataSourceError,
    bean_properties,
    parse_url,
    url_from_bean,
)
from relaymq_jdbc.engines import db_now_ms, make_engines, sqlite_file
from relaymq_jdbc.lease import LeaseLocker, LeaseLost, StoreLocked, default_holder
from relaymq_jdbc.schema import NAME_LEN, Schema, SchemaError, key_limit, make_schema, prepare
from relaymq_jdbc.txlock import TransactionLocker, UnsupportedLocker
from relaymq_jdbc.unreachable import DatabaseWait, short_error
from relaymq_jdbc.writer import (
    BATCH_BOUNDS,
    COMMIT_BOUNDS,
    EXPIRE,
    GroupWriter,
    KeyState,
    WriterStats,
)
from relaymq_jdbc.writer import prepare as prepare_ops

if TYPE_CHECKING:
    from relaymq.config.model import PluginElement

log = logging.getLogger("relaymq.jdbc")


class JDBCStoreError(StartupError):
    """The database cannot be used (unreachable, refused credentials, foreign tables):
    one line; `relaymq run` exits with status 3."""


class JDBCPersistenceAdapter(PersistenceAdapter):
    """ActiveMQ's `jdbcPersistenceAdapter` on SQLAlchemy (SQLite, PostgreSQL)."""

    Config = JDBCConfig
    persistent = True
    #: the key columns are VARCHAR(250) (ActiveMQ's width): 250 characters on
    #: PostgreSQL and SQLite (`schema.key_limit`, set per database in __init__)
    max_key_length = NAME_LEN

    def __init__(self, config: JDBCConfig | None = None, *, broker: Any = None,
                 **overrides: Any) -> None:
        if config is None:
            config = JDBCConfig(**overrides)
        elif overrides:
            raise TypeError("pass a JDBCConfig or keyword attributes, not both")
        problems = config.problems()
        if problems:
            where = f" at {config.origin}" if config.origin.line else ""
            lines = [f"<jdbcPersistenceAdapter>{where}: {p}" for p in problems]
            raise ConfigError("\n".join(lines), lines)
        self.config = config
        self.broker = broker
        broker_cfg = getattr(broker, "config", None)
        self.broker_name = str(getattr(broker_cfg, "broker_name", None) or "localhost")
        data = Path(config.directory or Path(getattr(broker_cfg, "data_directory", None) or "data")
                    / "jdbc")
        self.url: URL = resolve_url(config, data)
        if config.locking and config.holds_row_lock and self.url.get_backend_name() != "postgresql":
            where = f" at {config.origin}" if config.origin.line else ""
            raise ConfigError(
                f"<jdbcPersistenceAdapter>{where}: <transaction-database-locker> needs row locks "
                f"(PostgreSQL); {self.url.get_backend_name()} has none and a transaction held open "
                f"would lock the whole database against this broker's own writes; use "
                f"<lease-database-locker> there")
        self.schema: Schema = make_schema(config.table_prefix)
        self.max_key_length, self.max_key_unit = key_limit(self.url.get_backend_name())
        self.view: dict[str, KeyState] = {}
        self._size = 0
        self._writer: GroupWriter | None = None
        self._engines: tuple[sa.Engine, sa.Engine] | None = None
        self.lease: LeaseLocker | TransactionLocker | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._last: asyncio.Future[None] | None = None
        self._lost: str | None = None
        self._open = False

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any = None) -> JDBCPersistenceAdapter:
        return cls(config_from_element(element, broker), broker=broker)

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        """Check the element without connecting (`relaymq config check`)."""
        report = Report(strict=strict, quiet=True)  # returned: the caller reports them
        config = config_from_element(element, None, strict=strict, report=report)
        report.raise_if_errors()
        cls(config)  # the same checks as a start, without connecting
        return report.warnings + ignored_lines(config)

    # -- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        if self._open:
            return
        cfg = self.config
        for line in ignored_lines(cfg):
            warn_once(log, line)
        self._sqlite_file()
        writer_engine, reader_engine = make_engines(self.url, cfg.pool_size)
        self._engines = (writer_engine, reader_engine)
        try:
            if cfg.locking:
                # a master/slave pair waits for its database (down, restarting, or not
                # up yet after a reboot) instead of exiting
                await DatabaseWait(self.where(), cfg.locker.lock_acquire_sleep_interval).call(
                    self._prepare_schema, writer_engine)
            else:
                await asyncio.to_thread(self._prepare_schema, writer_engine)
            if cfg.locking:
                holder = cfg.locker.lease_holder_id or default_holder(self.broker_name)
                if cfg.holds_row_lock:
                    self.lease = TransactionLocker(
                        writer_engine, self.schema, holder, keep_alive_ms=cfg.keep_alive_ms,
                        acquire_ms=cfg.locker.lock_acquire_sleep_interval)
                else:
                    self.lease = LeaseLocker(
                        writer_engine, self.schema, holder,
                        lease_ms=cfg.lease_ms, keep_alive_ms=cfg.keep_alive_ms,
                        acquire_ms=cfg.locker.lock_acquire_sleep_interval,
                        max_diff_ms=cfg.locker.max_allowable_diff_from_db_time)
                await self.lease.acquire(
                    fail_if_locked=cfg.locker.fail_if_locked, what=self.where(),
                    waiting=lambda why: self.lock_changed(LockState.WAITING, why))
                self.lock_changed(LockState.HELD,
                                  f"the lease on {self.where()} held by {self.lease.holder}")
            state, next_id = await asyncio.to_thread(self._load, reader_engine)
        except StoreLocked as exc:
            await self._close_engines()
            raise StoreLockedError(str(exc)) from None
        except UnsupportedLocker as exc:
            await self._close_engines()
            where = f" at {cfg.origin}" if cfg.origin.line else ""
            raise ConfigError(f"<jdbcPersistenceAdapter>{where}: {exc}") from None
        except (sa.exc.SQLAlchemyError, SchemaError, OSError) as exc:
            await self._close_engines()
            raise JDBCStoreError(f"cannot open the JDBC store {self.where()}: "
                                 f"{short_error(exc)}") from exc
        except BaseException:
            await self._close_engines()
            raise
        self.view = {k: dataclasses.replace(v) for k, v in state.items()}
        self._size = sum(v.nbytes for v in state.values())
        loop = asyncio.get_running_loop()
        self._writer = GroupWriter(writer_engine, self.schema, state, next_id, self.lease, loop,
                                   self._apply_view, cfg.max_batch_size)
        self._writer.start()
        self._open = True
        if self.lease is not None:
            self._tasks.append(loop.create_task(self.lease.keep_alive(self._lease_lost),
                                                name="jdbc-lease"))
        if cfg.cleanup_period > 0:
            self._tasks.append(loop.create_task(self._cleanup_loop(), name="jdbc-cleanup"))
        total = sum(v.count for v in state.values())
        log.info("JDBC store %s: %d stored messages in %d destinations and subscriptions",
                 self.where(), total, sum(1 for v in state.values() if v.count))

    def _sqlite_file(self) -> None:
        """A SQLite store in the data directory (the default, an embedded Derby data
        source) is created with its directory, as kahaDB's is. A SQLite file the
        configuration names (`url`, a `jdbc:sqlite:` URL) is a database of the user's:
        its directory must exist, and a missing file is created only with
        createTablesOnStartup, so a mistyped path is an error rather than a new store."""
        path = sqlite_file(self.url)
        if path is None:
            return
        if embedded_sqlite(self.config):
            path.parent.mkdir(parents=True, exist_ok=True)
            return
        cfg = self.config
        where = f" at {cfg.origin}" if cfg.origin.line else ""
        if not path.parent.is_dir():
            raise ConfigError(
                f"<jdbcPersistenceAdapter>{where}: the directory {path.parent} of the SQLite "
                f"database {path} does not exist; correct the path, or create the directory")
        if path.exists():
            return
        if not cfg.create_tables_on_startup:
            raise ConfigError(
                f"<jdbcPersistenceAdapter>{where}: there is no SQLite database at {path} and "
                "createTablesOnStartup is false; correct the path, or set "
                "createTablesOnStartup=\"true\" to create a new, empty store there")
        log.warning("JDBC store: there is no SQLite database at %s; creating a new, empty one "
                    "(createTablesOnStartup)", path)

    def _prepare_schema(self, engine: sa.Engine) -> None:
        try:
            prepare(engine, self.schema, self.config.create_tables_on_startup)
        except sa.exc.SQLAlchemyError:
            # a second broker may have created the tables at the same moment: look again
            time.sleep(0.5)
            prepare(engine, self.schema, self.config.create_tables_on_startup)

    def _load(self, engine: sa.Engine) -> tuple[dict[str, KeyState], int]:
        k = self.schema.keys
        m = self.schema.msgs
        with engine.connect() as conn:
            state = {
                r.CONTAINER: KeyState(bool(r.DECLARED), int(r.LAST_SEQ), int(r.MSG_COUNT),
                                      int(r.MSG_BYTES), r.SUB_OPTIONS, True)
                for r in conn.execute(sa.select(k))
            }
            top = conn.execute(sa.select(sa.func.max(m.c.ID))).scalar()
        return state, int(top or 0) + 1

    async def stop(self) -> None:
        if not self._open:
            return
        self._open = False
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        if self._writer is not None:
            await asyncio.to_thread(self._writer.stop)
            st = self._writer.stats
            log.info("JDBC store %s: %d transactions carried %d store writes (%.1f per "
                     "transaction, %d operations); %d failed", self.where(), st.commits,
                     st.batches, st.batches_per_commit(), st.ops, st.failures)
            self._writer = None
        if self.lease is not None and self._lost is None:
            try:
                await asyncio.to_thread(self.lease.release)
            except Exception as exc:  # noqa: BLE001 - the lease then simply expires
                log.warning("releasing the store lease failed (%s); it expires by itself", exc)
        if self.lock_state == LockState.HELD:
            self.lock_state = LockState.NONE
        await self._close_engines()

    async def _close_engines(self) -> None:
        if self._engines is not None:
            for e in self._engines:
                await asyncio.to_thread(e.dispose)
            self._engines = None

    def _lease_lost(self, reason: str) -> None:
        """The keep-alive found the lease gone: nothing more is written, and the
        broker is told through the store's lock state (it stops serving, as for a
        lost kahaDB lock; docs/kernel.md#the-store-contract)."""
        self._lost = reason
        log.error("lost the lease on the JDBC store %s: %s. This broker stops serving now, "
                  "so that the slave that takes over is the only master; restart it to make "
                  "it a slave", self.where(), reason)
        self.lock_changed(LockState.LOST, f"the JDBC lease is lost: {reason}")

    # -- writing ------------------------------------------------------------------------

    async def write(self, ops: Sequence[StoreOp], *, sync: bool = True) -> None:
        if not ops:
            return
        writer = self._writer
        if not self._open or writer is None:
            raise JDBCStoreError(f"the JDBC store {self.where()} is not started")
        if self._lost is not None:
            raise LeaseLost(f"the JDBC store {self.where()} lease is lost: {self._lost}")
        fut = asyncio.get_running_loop().create_future()
        writer.submit(prepare_ops(ops), fut)
        self._last = fut
        await fut

    def _apply_view(self, changed: dict[str, KeyState]) -> None:
        view = self.view
        for k, st in changed.items():
            old = view.get(k)
            self._size += st.nbytes - (old.nbytes if old is not None else 0)
            view[k] = st

    async def _settled(self) -> None:
        """Wait until every write queued so far has committed (or failed)."""
        last = self._last
        if last is not None and not last.done():
            await asyncio.wait([last])

    # -- reading ---------------------------------------------------------------------

    def _reader(self) -> sa.Engine:
        if self._engines is None:
            raise JDBCStoreError(f"the JDBC store {self.where()} is not started")
        return self._engines[1]

    async def destinations(self) -> list[str]:
        await self._settled()
        return sorted(k for k, v in self.view.items()
                      if v.declared and not k.startswith("durable://"))

    async def subscriptions(self) -> list[SubscriptionRecord]:
        await self._settled()
        return await asyncio.to_thread(self._subscriptions, self._reader())

    def _subscriptions(self, engine: sa.Engine) -> list[SubscriptionRecord]:
        a = self.schema.acks
        out = []
        with engine.connect() as conn:
            for r in conn.execute(sa.select(a).order_by(a.c.CLIENT_ID, a.c.SUB_NAME)):
                st = self.view.get(r.SUB_DEST or "")
                opts = json.loads(st.options) if st is not None and st.options else {}
                out.append(SubscriptionRecord(r.CLIENT_ID, r.SUB_NAME, r.CONTAINER, r.SELECTOR,
                                              bool(opts.get("no_local", False)),
                                              dict(opts.get("extra") or {})))
        return out

    async def read(self, dest: str, after: int = 0, limit: int | None = None) -> list[StoredMessage]:
        if limit is not None and limit <= 0:
            return []
        await self._settled()
        st = self.view.get(dest)
        if st is None or st.count <= 0:
            return []
        rows = await asyncio.to_thread(self._read, self._reader(), dest, after, limit)
        out = []
        for seq, data in rows:
            try:
                out.append(StoredMessage(int(seq), decode_message(data)))
            except ValueError as exc:
                log.error("JDBC store: message %s seq %d is unreadable (%s); skipped",
                          dest, seq, exc)
        return out

    def _read(self, engine: sa.Engine, dest: str, after: int,
              limit: int | None) -> list[tuple[int, bytes]]:
        m = self.schema.msgs
        q = (sa.select(m.c.SEQ, m.c.MSG).where(m.c.CONTAINER == dest, m.c.SEQ > after)
             .order_by(m.c.SEQ))
        if limit is not None:
            q = q.limit(limit)
        with engine.connect() as conn:
            return [(r[0], bytes(r[1])) for r in conn.execute(q)]

    async def duplicate_ids(self) -> list[DuplicateIdRecord]:
        await self._settled()
        return await asyncio.to_thread(self._duplicate_ids, self._reader())

    def _duplicate_ids(self, engine: sa.Engine) -> list[DuplicateIdRecord]:
        d = self.schema.dups
        with engine.connect() as conn:
            return [DuplicateIdRecord(r[0], int(r[1]), bytes(r[2])) for r in conn.execute(
                sa.select(d.c.ADDRESS, d.c.SEQ, d.c.DUP_ID).order_by(d.c.ADDRESS, d.c.SEQ))]

    async def stats(self, dest: str) -> DestinationStats:
        await self._settled()
        st = self.view.get(dest)
        if st is None:
            return DestinationStats()
        return DestinationStats(count=st.count, size=st.nbytes, last_seq=st.last_seq)

    def size(self) -> int:
        """Bytes of live stored messages (the MSG column), kept exact per commit."""
        return self._size

    def where(self) -> str:
        prefix = f" tablePrefix={self.config.table_prefix}" if self.config.table_prefix else ""
        return f"{self.url.render_as_string(hide_password=True)}{prefix}"

    def describe(self) -> str:
        cfg = self.config
        if not cfg.locking:
            lock = "no lock"
        elif cfg.holds_row_lock:
            lock = f"transaction-database-locker, row touched every {cfg.keep_alive_ms} ms"
        else:
            lock = (f"lease-database-locker lease {cfg.lease_ms} ms, renewed every "
                    f"{cfg.keep_alive_ms} ms")
        return f"jdbcPersistenceAdapter {self.where()} ({lock})"

    def usage_report(self, top: int = 5) -> str:
        keys = sorted(self.view.items(), key=lambda kv: -kv[1].nbytes)[:top]
        held = ", ".join(f"{k} {v.nbytes / 1e6:.1f} MB ({v.count} msgs)" for k, v in keys if v.count)
        return f"JDBC store {self.where()}: {self._size / 1e6:.1f} MB of messages; largest: {held or 'none'}"

    def writer_stats(self) -> dict[str, float]:
        """Group-commit counters for benchmarks: commits, batches and operations."""
        w = self._writer
        if w is None:
            return {}
        s = w.stats
        return {"commits": s.commits, "batches": s.batches, "ops": s.ops,
                "batches_per_commit": s.batches_per_commit(), "failures": s.failures}

    def journal_metrics(self) -> dict[str, Any]:
        """For monitoring (relaymq-console): the store's durable writes as a journal's
        syncs (one database transaction commit each, with its latency histogram) and
        the store writes each carried (batch sizes). Histograms are `(upper bound,
        count)` pairs, not cumulative, the last bound `inf`."""
        w = self._writer
        s = w.stats if w is not None else WriterStats()
        return {
            "store": "jdbc", "syncs": s.commits, "sync_seconds": s.commit_seconds,
            "sync_buckets": list(zip((*COMMIT_BOUNDS, float("inf")), s.commit_buckets,
                                     strict=True)),
            "batches": s.commits, "batch_records": s.batches,
            "batch_buckets": list(zip((*BATCH_BOUNDS, float("inf")), s.batch_buckets,
                                      strict=True)),
        }

    # -- cleanup --------------------------------------------------------------------------

    async def _cleanup_loop(self) -> None:
        period = self.config.cleanup_period / 1000
        while True:
            await asyncio.sleep(period)
            try:
                await self.cleanup()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - try again next period
                log.warning("JDBC store cleanup failed (%s); retrying in %.0f s", exc, period)

    async def cleanup(self) -> None:
        """Delete messages that expired more than one cleanupPeriod ago (the broker
        had that long to dead-letter them)."""
        if self._writer is None or self._lost is not None:
            return
        cutoff = int(time.time() * 1000) - self.config.cleanup_period
        fut = asyncio.get_running_loop().create_future()
        self._writer.submit([(EXPIRE, cutoff)], fut)
        self._last = fut
        await fut


def ignored_lines(config: JDBCConfig) -> list[str]:
    """The settings that have no effect, as `config check` lists and a start logs them."""
    where = f" at {config.origin}" if config.origin.line else ""
    return [f"<jdbcPersistenceAdapter>{where}: {line}" for line in config.ignored_settings()]


def config_from_element(element: PluginElement, broker: Any, *, strict: bool = False,
                        report: Report | None = None) -> JDBCConfig:
    """`<jdbcPersistenceAdapter>` with its `<locker>` and referenced `<bean>` -> JDBCConfig
    (`report`: where the attributes it ignores go; logged when there is none)."""
    from relaymq.config.typed import convert

    if strict is False:
        strict = bool(getattr(getattr(broker, "plugins", None), "strict", False))
    config = convert(JDBCConfig, element, strict=strict, report=report,
                     ignore=("locker", "bean", "dataSource"))
    config.data_source = element.attributes.get("dataSource", "").strip()
    where = f" at {element.origin}" if element.origin.line else ""
    locker_el = element.child("locker")
    if locker_el is not None:
        kinds = [c for c in locker_el.children]
        if len(kinds) != 1 or kinds[0].tag not in LOCKERS:
            names = ", ".join(f"<{c.tag}>" for c in kinds) or "nothing"
            raise ConfigError(f"<locker>{where} holds {names}; it takes one of "
                              f"{', '.join('<' + k + '>' for k in LOCKERS)}")
        config.locker = convert(LockerConfig, kinds[0], strict=strict, report=report)
        config.locker_kind = kinds[0].tag
    if config.data_source:
        ref = config.data_source.removeprefix("#")
        beans = [b for b in element.children_named("bean") if b.attributes.get("id") == ref]
        if not beans:
            raise ConfigError(f"<jdbcPersistenceAdapter dataSource=\"{config.data_source}\">{where}: "
                              f"no <bean id=\"{ref}\"> in the configuration file")
        config.bean = beans[0]
    return config


def embedded_sqlite(config: JDBCConfig) -> bool:
    """The store is an embedded database RelayMQ creates where it belongs: the default
    SQLite file in the data directory, or an embedded Derby data source's."""
    if config.url:
        return config.url.strip().startswith("jdbc:derby:")
    if config.bean is None:
        return True
    props = bean_properties(config.bean)
    return (config.bean.attributes.get("class", "").strip() in DERBY_CLASSES
            or props.get("url", "").strip().startswith("jdbc:derby:"))


def resolve_url(config: JDBCConfig, data_dir: Path) -> URL:
    """The database the config names; SQLite in the data directory by default."""
    try:
        if config.bean is not None:
            return url_from_bean(config.bean, data_dir)
        if config.url:
            return parse_url(config.url)
    except DataSourceError as exc:
        where = f" at {config.origin}" if config.origin.line else ""
        raise ConfigError(f"<jdbcPersistenceAdapter>{where}: {exc}") from None
    return URL.create("sqlite", database=str(data_dir / "activemq.sqlite"))


__all__ = ["JDBCPersistenceAdapter", "JDBCStoreError", "db_now_ms"]
