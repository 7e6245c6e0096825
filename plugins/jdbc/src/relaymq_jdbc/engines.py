"""SQLAlchemy engines for the store: one for the writer (and the lease), one for reads.

SQLite: 16 KiB pages for a new database, WAL journal (readers never wait for
the writer), ``synchronous=FULL``
(a commit is on disk before the producer hears "stored"), a busy timeout for
the second broker of a master/slave pair, and explicit ``BEGIN`` statements
(``BEGIN IMMEDIATE`` on the writer engine) so that a transaction's first
SELECT and its writes are one atomic unit — the lease check depends on it.

PostgreSQL: psycopg 3; the writer's connection is kept, reads use a small pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL

#: SQLite page size of a database the store creates
PAGE_SIZE = 16384


def _sqlite(url: URL, begin: str, pool_size: int) -> sa.Engine:
    engine = sa.create_engine(url, pool_size=pool_size, max_overflow=pool_size,
                              connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we say BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        # a new database's page size (ignored once it has tables): 16 KiB pages hold
        # ~14 stored 1 KiB messages, so a group commit touches fewer pages
        cur.execute(f"PRAGMA page_size={PAGE_SIZE}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql(begin)

    return engine


def make_engines(url: URL, pool_size: int) -> tuple[sa.Engine, sa.Engine]:
    """(writer engine, reader engine) for `url`."""
    if url.get_backend_name() == "sqlite":
        return (_sqlite(url, "BEGIN IMMEDIATE", 2), _sqlite(url, "BEGIN", pool_size))
    kw: dict[str, Any] = {"pool_recycle": 3600}
    if url.get_backend_name() == "postgresql":
        kw["connect_args"] = {"connect_timeout": 10, "application_name": "relaymq"}
    return (sa.create_engine(url, pool_size=2, max_overflow=2, **kw),
            sa.create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True,
                             **kw))


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL (None for another database, memory or a `file:` URI)."""
    path = url.database
    if url.get_backend_name() != "sqlite" or not path or path == ":memory:" \
            or path.startswith("file:"):
        return None
    return Path(path)


def read_only_engine(url: URL) -> sa.Engine:
    """An engine that only reads the store at `url`: a SQLite file is opened
    read-only, so a mistyped path is an error, not a new empty database."""
    import sqlite3

    path = sqlite_file(url)
    if path is None:
        return sa.create_engine(url)
    if not path.is_file():
        raise FileNotFoundError(f"no SQLite database at {path}")
    uri = path.resolve().as_uri() + "?mode=ro"
    return sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True))


def db_now_ms(dialect: str) -> sa.ColumnElement[int]:
    """The database's clock, milliseconds since the epoch, as a SQL expression."""
    if dialect == "sqlite":
        return sa.literal_column(
            "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)", sa.BigInteger)
    return sa.literal_column(
        "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)", sa.BigInteger)
