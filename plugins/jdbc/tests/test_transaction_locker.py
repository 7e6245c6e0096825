"""`transaction-database-locker` on a real PostgreSQL: a row lock held in an open
transaction; two `relaymq run` processes, kill -9 of the master under load; a
master whose lock connection is ended stops serving; SQLite is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaymq.errors import ConfigError
from relaymq.testing.blocking_stomp import BlockingStomp
from relaymq.testing.waits import wait_until
from relaymq_jdbc import JDBCPersistenceAdapter
from relaymq_jdbc.testing import PostgresCluster

from .brokers import BrokerProcess, fail_over_under_load

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("proton", reason="python-qpid-proton is not installed")

KIND = "transaction-database-locker"


def lock_backends(cluster: PostgresCluster, db: str) -> list[tuple[int, str, str]]:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=cluster.port, user="relaymq", dbname="postgres",
                         autocommit=True) as conn:
        return [(int(r[0]), str(r[1]), str(r[2])) for r in conn.execute(
            "SELECT pid, application_name, state FROM pg_stat_activity "
            "WHERE datname = %s AND application_name LIKE 'relaymq-lock:%%'", (db,))]


@pytest.mark.slow
def test_row_lock_failover_on_postgres(tmp_path: Path, postgres: PostgresCluster) -> None:
    db = postgres.create_database()
    url = postgres.url(db)
    master = BrokerProcess(tmp_path, url, "master", kind=KIND, lease=300, keep_alive=1000).start()
    slave = BrokerProcess(tmp_path, url, "slave", kind=KIND, lease=300, keep_alive=1000)
    slave.start(wait=False)
    try:
        wait_until(lambda: "this broker is a slave" in slave.output(),
                   "the slave to say it waits for the row lock", 60,
                   detail=slave.output)
        assert "locked by master@" in slave.output()  # named from pg_stat_activity
        backends = lock_backends(postgres, db)
        assert len(backends) == 1 and backends[0][1].startswith("relaymq-lock:master@")
        assert backends[0][2] == "idle in transaction"  # the held transaction
        assert not slave.listening()
        # no lease to wait out: the row lock goes with the master's connection
        fail_over_under_load(master, slave, "TX")
        master.start(wait=False)
        wait_until(lambda: "this broker is a slave" in master.output(),
                   "the restarted master to wait as a slave", 60,
                   detail=master.output)
        line = master.output().split("this broker is a slave")[0].rsplit("\n", 1)[-1]
        assert "locked by slave@" in line
        assert not master.listening()
    finally:
        master.kill()
        slave.stop()


def test_a_master_whose_lock_connection_ends_stops_serving(tmp_path: Path,
                                                           postgres: PostgresCluster) -> None:
    import psycopg

    db = postgres.create_database()
    master = BrokerProcess(tmp_path, postgres.url(db), "victim", kind=KIND, lease=300,
                           keep_alive=300).start()
    try:
        client = BlockingStomp(master.stomp_port)
        assert client.send("/queue/L", b"before")[0] == "RECEIPT"
        client.close()
        [(pid, _name, _state)] = lock_backends(postgres, db)
        with psycopg.connect(host="127.0.0.1", port=postgres.port, user="relaymq",
                             dbname="postgres", autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert master.proc is not None
        wait_until(lambda: master.proc.poll() is not None, "the master to stop", 30,
                   detail=master.output)
        assert master.proc.returncode == 6
        out = master.output()
        assert "lost the lease on the JDBC store" in out and "row lock" in out
        assert "Traceback" not in out
        with psycopg.connect(host="127.0.0.1", port=postgres.port, user="relaymq", dbname=db) as conn:
            rows = conn.execute("SELECT count(*) FROM \"ACTIVEMQ_MSGS\"").fetchone()
        assert rows is not None and rows[0] == 1
    finally:
        master.kill()


def test_sqlite_is_refused_with_the_reason(tmp_path: Path) -> None:
    from relaymq.config.model import PluginElement

    el = PluginElement("jdbcPersistenceAdapter", {"url": f"sqlite:///{tmp_path}/x.sqlite"},
                       children=[PluginElement("locker", children=[PluginElement(KIND)])])
    with pytest.raises(ConfigError, match="needs row locks \\(PostgreSQL\\); sqlite has none"):
        JDBCPersistenceAdapter.from_element(el)


def test_a_clean_stop_frees_the_row_lock(tmp_path: Path, postgres: PostgresCluster) -> None:
    db = postgres.create_database()
    first = BrokerProcess(tmp_path, postgres.url(db), "first", kind=KIND, lease=200).start()
    second = BrokerProcess(tmp_path, postgres.url(db), "second", kind=KIND, lease=200)
    second.start(wait=False)
    try:
        wait_until(lambda: "is a slave" in second.output(), "the second broker to wait", 60,
                   detail=second.output)
        first.stop()
        second.wait_listening(timeout=30)
        names = [b[1] for b in lock_backends(postgres, db)]
        assert len(names) == 1 and names[0].startswith("relaymq-lock:second@"), names
    finally:
        first.kill()
        second.stop()
