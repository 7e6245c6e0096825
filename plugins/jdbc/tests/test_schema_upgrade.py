"""Tables of schema version 1 are upgraded at start (the EXPIRATION index becomes
partial), on SQLite and PostgreSQL; nothing stored is lost and expiry still works."""

from __future__ import annotations

import time
from pathlib import Path

import sqlalchemy as sa
from relaymq.model.message import Message
from relaymq.spi.persistence import AddDestination, AddMessage
from relaymq_jdbc import JDBCConfig, JDBCPersistenceAdapter
from relaymq_jdbc.schema import SCHEMA_VERSION

DEST = "queue://upgrade"


def index_sql(engine: sa.Engine) -> str:
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            return str(conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'ACTIVEMQ_MSGS_EIDX'").scalar_one())
        return str(conn.exec_driver_sql(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'ACTIVEMQ_MSGS_EIDX'").scalar_one())


def rows(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql('SELECT count(*) FROM "ACTIVEMQ_MSGS"').scalar_one())


def version(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql(
            "SELECT \"VERSION\" FROM \"RELAYMQ_SCHEMA\" WHERE \"NAME\" = 'relaymq'").scalar_one())


async def check_upgrade(url: str) -> None:
    store = JDBCPersistenceAdapter(JDBCConfig(url=url, cleanup_period=600_000))
    await store.start()
    expired = int(time.time() * 1000) - 3_600_000  # before the cleanup cutoff
    await store.write([AddDestination(DEST),
                       AddMessage(DEST, 1, Message(b"kept", durable=True, message_id="ID:a:1:1:1")),
                       AddMessage(DEST, 2, Message(b"expired", durable=True, expiration=expired,
                                                   message_id="ID:a:1:1:2"))])
    await store.stop()
    engine = sa.create_engine(url)
    try:
        assert "WHERE" in index_sql(engine).upper()
        assert version(engine) == SCHEMA_VERSION == 2
        with engine.begin() as conn:  # as a version 1 store left them
            conn.exec_driver_sql('DROP INDEX "ACTIVEMQ_MSGS_EIDX"')
            conn.exec_driver_sql('CREATE INDEX "ACTIVEMQ_MSGS_EIDX" ON "ACTIVEMQ_MSGS" '
                                 '("EXPIRATION")')
            conn.exec_driver_sql('UPDATE "RELAYMQ_SCHEMA" SET "VERSION" = 1')
        assert "WHERE" not in index_sql(engine).upper() and version(engine) == 1

        store = JDBCPersistenceAdapter(JDBCConfig(url=url, cleanup_period=600_000))
        await store.start()
        try:
            assert "WHERE" in index_sql(engine).upper()
            assert version(engine) == 2
            assert [m.message.body for m in await store.read(DEST)] == [b"kept", b"expired"]
            assert (await store.stats(DEST)).count == rows(engine) == 2
            await store.cleanup()  # the expiry sweep uses the partial index
            assert (await store.stats(DEST)).count == rows(engine) == 1
            assert [m.message.body for m in await store.read(DEST)] == [b"kept"]
        finally:
            await store.stop()
    finally:
        engine.dispose()


async def test_sqlite_tables_of_version_1_are_upgraded(tmp_path: Path) -> None:
    await check_upgrade(f"sqlite:///{tmp_path / 'store.sqlite'}")


async def test_a_new_sqlite_store_has_16_kib_pages(tmp_path: Path) -> None:
    store = JDBCPersistenceAdapter(JDBCConfig(url=f"sqlite:///{tmp_path / 's.sqlite'}"))
    await store.start()
    await store.stop()
    import sqlite3

    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 16384


async def test_postgresql_tables_of_version_1_are_upgraded(postgres_url: str) -> None:
    await check_upgrade(postgres_url)
