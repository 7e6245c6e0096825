"""`relaymq jdbc inspect URL`: what a store holds and who holds the lease, read-only."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import AddDestination, AddMessage, RemoveMessage
from relaymq.testing.processes import RELAYMQ
from relaymq_jdbc import JDBCConfig, JDBCPersistenceAdapter
from relaymq_jdbc.cli import jdbc
from relaymq_jdbc.testing import PostgresCluster

from .brokers import BrokerProcess


def msg(n: int) -> Message:
    return Message(b"x" * 100, destination=Destination.parse("queue://orders"),
                   message_id=f"ID:i-{n}", durable=True, timestamp=1_700_000_000_000 + n)


async def test_inspect_shows_counts_oldest_and_lease(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    store = JDBCPersistenceAdapter(JDBCConfig(url=url, cleanup_period=0),
                                   broker=None)
    await store.start()
    try:
        await store.write([AddDestination("queue://orders"),
                           *[AddMessage("queue://orders", n, msg(n)) for n in range(1, 6)]])
        await store.write([RemoveMessage("queue://orders", 1)])
        result = CliRunner().invoke(jdbc, ["inspect", url, "--json"])
        assert result.exit_code == 0, result.output
        rep = json.loads(result.output)
        (row,) = rep["keys"]
        assert (row["key"], row["messages"], row["last_seq"]) == ("queue://orders", 4, 5)
        assert row["oldest_timestamp"] == 1_700_000_000_002
        assert row["bytes"] > 400
        assert rep["lease"]["holder"].startswith("localhost@")
        assert rep["lease"]["expires_in_ms"] > 0
        text = CliRunner().invoke(jdbc, ["inspect", url]).output
        assert "lease: held by localhost@" in text and "queue://orders" in text
    finally:
        await store.stop()
    text = CliRunner().invoke(jdbc, ["inspect", url]).output
    assert "lease: free" in text  # a clean stop releases it


def test_inspect_of_a_database_without_a_store_fails_clearly(tmp_path: Path) -> None:
    import sqlite3

    sqlite3.connect(tmp_path / "empty.sqlite").close()  # a database, without the tables
    result = CliRunner().invoke(jdbc, ["inspect", f"sqlite:///{tmp_path / 'empty.sqlite'}"])
    assert result.exit_code == 1
    assert "cannot read the store" in result.output and "no such table" in result.output
    # a mistyped path: said so, and no empty database is left behind (inspect only reads)
    typo = tmp_path / "emtpy.sqlite"
    result = CliRunner().invoke(jdbc, ["inspect", f"sqlite:///{typo}"])
    assert result.exit_code == 1 and f"no SQLite database at {typo}" in result.output
    assert not typo.exists()


def inspect_cmd(*args: str) -> str:
    proc = subprocess.run([RELAYMQ, "jdbc", "inspect", *args], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_inspect_names_the_holder_of_a_transaction_lock(tmp_path: Path,
                                                        postgres: PostgresCluster) -> None:
    url = postgres.url(postgres.create_database())
    master = BrokerProcess(tmp_path, url, "rowlocked", kind="transaction-database-locker").start()
    try:
        text = inspect_cmd(url)
        assert "lock: held by rowlocked@" in text, text
        assert "transaction-database-locker" in text and "lease: free" not in text
        rep = json.loads(inspect_cmd(url, "--json"))
        assert rep["row_lock"]["holder"].startswith("rowlocked@") and rep["lease"] is None
    finally:
        master.stop()
    text = inspect_cmd(url)  # the stop rolled the transaction back: the lock is free
    assert "lease: free" in text and "rowlocked" not in text, text
