"""The JDBC store as an operator meets it: `relaymq run` processes, STOMP and AMQP
producers, kill -9, restarts, and a master/slave pair on one PostgreSQL."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from relaymq.testing.blocking_stomp import BlockingStomp, drain_queue
from relaymq.testing.waits import wait_until
from relaymq_jdbc.testing import PostgresCluster

from .brokers import BrokerProcess, Producers, check_exactly_once, fail_over_under_load

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
pytest.importorskip("proton", reason="python-qpid-proton is not installed")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.external("postgres"))])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.sqlite'}"
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.url(cluster.create_database())


@pytest.mark.slow
def test_kill_9_under_load_loses_nothing_acknowledged(tmp_path: Path, store_url: str) -> None:
    broker = BrokerProcess(tmp_path, store_url, "crash").start()
    producers = Producers(broker, "CRASH").start()
    wait_until(lambda: producers.count() >= 300, "both producers to get messages stored", 60,
               detail=broker.output)
    broker.kill()
    producers.join()
    acked = list(producers.acked)
    assert any(b.startswith("stomp-") for b in acked) and any(b.startswith("amqp-") for b in acked)
    broker.start()
    try:
        got = drain_queue(broker.stomp_port, "CRASH")
    finally:
        broker.stop()
    check_exactly_once(acked, got)
    assert len(got) <= producers.sent  # nothing that was never sent


@pytest.mark.slow
def test_master_slave_failover_on_postgres(tmp_path: Path, postgres: PostgresCluster) -> None:
    url = postgres.url(postgres.create_database())
    master = BrokerProcess(tmp_path, url, "master").start()
    slave = BrokerProcess(tmp_path, url, "slave").start(wait=False)
    try:
        wait_until(lambda: "this broker is a slave" in slave.output(),
                   "the slave to say it waits for the lease", 60,
                   detail=slave.output)
        assert "master@" in slave.output()  # it names the holder
        assert not slave.listening()  # a slave opens no connectors
        fail_over_under_load(master, slave, "HA")  # lease (3 s) + one acquire interval (3 s)
        # the old master, restarted, is now the slave
        master.start(wait=False)
        wait_until(lambda: master.output().count("this broker is a slave") >= 1,
                   "the restarted master to wait as a slave", 60,
                   detail=master.output)
        assert "slave@" in master.output().split("this broker is a slave")[0].rsplit("\n", 1)[-1]
        assert not master.listening()
    finally:
        master.kill()
        slave.stop()


def test_a_clean_stop_hands_the_lease_over_at_once(tmp_path: Path, postgres: PostgresCluster) -> None:
    url = postgres.url(postgres.create_database())
    first = BrokerProcess(tmp_path, url, "first", lease=60000, keep_alive=1000).start()
    second = BrokerProcess(tmp_path, url, "second", lease=1000, keep_alive=300).start(wait=False)
    try:
        wait_until(lambda: "is a slave" in second.output(), "the second broker to wait", 60,
                   detail=second.output)
        first.stop()  # releases the 60 s lease: no need to wait for it to expire
        second.wait_listening(timeout=30)
    finally:
        first.kill()
        second.stop()


def test_a_master_that_loses_its_lease_stops_serving(tmp_path: Path,
                                                      postgres: PostgresCluster) -> None:
    """Another holder takes the lease row (as a slave would after an expiry the
    master missed): the master's next store transaction or renewal sees it,
    refuses to commit, and the broker process stops with status 6 (a service manager restarts it)."""
    import psycopg

    db = postgres.create_database()
    master = BrokerProcess(tmp_path, postgres.url(db), "victim", keep_alive=300,
                           lease=3000).start()
    try:
        client = BlockingStomp(master.stomp_port)
        assert client.send("/queue/L", b"before")[0] == "RECEIPT"
        with psycopg.connect(host="127.0.0.1", port=postgres.port, user="relaymq", dbname=db,
                             autocommit=True) as conn:
            conn.execute("UPDATE \"ACTIVEMQ_LOCK\" SET \"BROKER_NAME\" = 'thief', "
                         "\"TIME\" = 9999999999999 WHERE \"ID\" = 1")
        assert master.proc is not None
        wait_until(lambda: master.proc.poll() is not None, "the master to stop", 30,
                   detail=master.output)
        assert master.proc.returncode == 6
        out = master.output()
        assert "lost the lease on the JDBC store" in out and "thief" in out
        assert "Traceback" not in out
        with psycopg.connect(host="127.0.0.1", port=postgres.port, user="relaymq", dbname=db) as conn:
            rows = conn.execute("SELECT count(*) FROM \"ACTIVEMQ_MSGS\"").fetchone()
        assert rows is not None and rows[0] == 1  # what it acknowledged is there
    finally:
        master.kill()


def test_duplicate_ids_survive_kill_9(tmp_path: Path, store_url: str) -> None:
    """`_AMQ_DUPL_ID`s are stored with their messages: after kill -9 and a restart,
    a resend with a seen id (STOMP or AMQP) is acknowledged and dropped."""
    from proton import Message
    from proton.utils import BlockingConnection

    broker = BrokerProcess(tmp_path, store_url, "dups").start()
    client = BlockingStomp(broker.stomp_port)
    assert client.send("/queue/D", b"first", _AMQ_DUPL_ID="order-1")[0] == "RECEIPT"
    assert client.send("/queue/D", b"second", _AMQ_DUPL_ID="order-2")[0] == "RECEIPT"
    client.close()
    broker.kill()
    broker.start()
    try:
        client = BlockingStomp(broker.stomp_port)
        assert client.send("/queue/D", b"again", _AMQ_DUPL_ID="order-1")[0] == "RECEIPT"
        conn = BlockingConnection(f"amqp://127.0.0.1:{broker.amqp_port}", timeout=10)
        sender = conn.create_sender("queue://D")
        sender.send(Message(body="amqp again", durable=True, properties={"_AMQ_DUPL_ID": "order-2"}))
        sender.send(Message(body="new", durable=True, properties={"_AMQ_DUPL_ID": "order-3"}))
        conn.close()
        got = drain_queue(broker.stomp_port, "D")
    finally:
        broker.stop()
    assert sorted(got) == ["first", "new", "second"]


def test_fail_if_locked_exits_with_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locked.sqlite'}"
    first = BrokerProcess(tmp_path, url, "holder", lease=60000, keep_alive=1000).start()
    try:
        second = BrokerProcess(tmp_path, url, "refused", locker='failIfLocked="true"')
        second.start(wait=False)
        assert second.proc is not None
        assert second.proc.wait(60) == 4  # a locked store (docs/cli.md)
        out = second.output()
        assert "is locked by holder@" in out and "remove failIfLocked" in out
        assert "Traceback" not in out
    finally:
        first.stop()


def test_relaymq_run_with_a_bad_data_source_says_so_in_one_line(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, "mysql://localhost/activemq", "bad")
    broker.start(wait=False)
    assert broker.proc is not None and broker.proc.wait(60) == 1
    out = broker.output()
    lines = [line for line in out.splitlines() if "jdbcPersistenceAdapter" in line]
    assert len(lines) == 1 and "RelayMQ's JDBC store runs on PostgreSQL and SQLite" in lines[0]
    assert "Traceback" not in out


def test_a_broker_whose_database_is_down_waits_for_it_and_stops_on_sigterm(
        tmp_path: Path) -> None:
    """As ActiveMQ's lockers: a broker started before its database keeps trying
    (each new error logged once, in one line) instead of exiting; SIGTERM stops it
    while it waits."""
    from .silent_server import SilentServer

    down = SilentServer()  # accepts and hangs up: a server that is not there yet
    try:
        broker = BrokerProcess(tmp_path, f"postgresql+psycopg://amq@127.0.0.1:{down.port}/amq",
                               "gone", lease=200)
        broker.start(wait=False)
        assert broker.proc is not None
        wait_until(lambda: down.accepted >= 6, "six tries of the database", 60)
        assert broker.proc.poll() is None, broker.output()  # still waiting, not exited
        waits = [line for line in broker.output().splitlines() if "cannot be reached" in line]
        assert len(waits) == 1, waits  # once per error, not per attempt
        assert f"127.0.0.1:{down.port}" in waits[0] and "retrying every 200 ms" in waits[0]
        broker.proc.send_signal(signal.SIGTERM)
        assert broker.proc.wait(15) == 0
        assert "before it started" in broker.output()
        assert "Traceback" not in broker.output()
    finally:
        down.close()


def test_a_slave_waiting_for_the_lease_stops_on_sigterm(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pair.sqlite'}"
    master = BrokerProcess(tmp_path, url, "master", lease=60000, keep_alive=1000).start()
    try:
        slave = BrokerProcess(tmp_path, url, "slave", lease=500)
        slave.start(wait=False)
        assert slave.proc is not None
        wait_until(lambda: "is a slave and waits for the lease" in slave.output(),
                   "the slave waiting", 30)
        slave.proc.send_signal(signal.SIGTERM)
        assert slave.proc.wait(15) == 0
        assert "before it started" in slave.output()
        assert master.alive()
    finally:
        master.stop()


def test_a_sqlite_url_into_a_missing_directory_stops_the_start(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    broker = BrokerProcess(tmp_path, f"sqlite:///{missing / 'store.sqlite'}", "typo")
    broker.start(wait=False)
    try:
        assert broker.proc is not None
        wait_until(lambda: broker.proc.poll() is not None, "the start to stop", 60,
                   detail=broker.output)
        assert broker.proc.returncode == 1  # a configuration error
    finally:
        broker.kill()
    out = broker.output()
    lines = [line for line in out.splitlines() if "jdbcPersistenceAdapter" in line
             and "does not exist" in line]
    assert len(lines) == 1 and f"the directory {missing} of the SQLite database" in lines[0]
    assert not missing.exists()  # nothing was created
    assert "Traceback" not in out


def test_a_mistyped_sqlite_file_name_is_never_a_silent_new_store(tmp_path: Path) -> None:
    store = tmp_path / "orders.sqlite"
    first = BrokerProcess(tmp_path, f"sqlite:///{store}", "first").start()
    try:
        assert BlockingStomp(first.stomp_port).send("/queue/K", b"kept")[0] == "RECEIPT"
    finally:
        first.stop()
    typo = tmp_path / "order.sqlite"
    # createTablesOnStartup="false": the store must exist, so the typo stops the start
    strict = BrokerProcess(tmp_path, f"sqlite:///{typo}", "strict",
                           adapter='createTablesOnStartup="false"')
    strict.start(wait=False)
    try:
        assert strict.proc is not None
        wait_until(lambda: strict.proc.poll() is not None, "the start to stop", 60,
                   detail=strict.output)
        assert strict.proc.returncode == 1
    finally:
        strict.kill()
    assert f"there is no SQLite database at {typo} and createTablesOnStartup is false" \
        in strict.output()
    assert not typo.exists() and "Traceback" not in strict.output()
    # the default creates the new store, and says so
    fresh = BrokerProcess(tmp_path, f"sqlite:///{typo}", "fresh").start()
    try:
        assert f"there is no SQLite database at {typo}; creating a new, empty one" \
            in fresh.output()
        assert drain_queue(fresh.stomp_port, "K") == []
    finally:
        fresh.stop()
    again = BrokerProcess(tmp_path, f"sqlite:///{store}", "again").start()
    try:
        assert "no SQLite database" not in again.output()  # an existing store: no word
        assert drain_queue(again.stomp_port, "K") == ["kept"]
    finally:
        again.stop()
