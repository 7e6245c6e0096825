"""The JDBC store as an operator meets it: `relaymq run` processes, STOMP and AMQP
producers, kill -9, restarts, and a master/slave pair on one PostgreSQL."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from relaymq_jdbc.testing import PostgresCluster

from .brokers import BrokerProcess, Producers, drain, wait_until

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
pytest.importorskip("proton", reason="python-qpid-proton is not installed")


def check_exactly_once(acked: list[str], got: list[str]) -> None:
    counts = collections.Counter(got)
    duplicates = {b: n for b, n in counts.items() if n > 1}
    assert not duplicates, f"delivered more than once: {list(duplicates.items())[:10]}"
    missing = sorted(set(acked) - set(counts))
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:10]}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.sqlite'}"
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.url(cluster.create_database())


@pytest.mark.slow
def test_kill_9_under_load_loses_nothing_acknowledged(tmp_path: Path, store_url: str) -> None:
    broker = BrokerProcess(tmp_path, store_url, "crash").start()
    producers = Producers(broker, "CRASH").start()
    wait_until("both producers to get messages stored", lambda: producers.count() >= 300, 60,
               broker.output)
    broker.kill()
    producers.join()
    acked = list(producers.acked)
    assert any(b.startswith("stomp-") for b in acked) and any(b.startswith("amqp-") for b in acked)
    broker.start()
    try:
        got = drain(broker.stomp_port, "CRASH")
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
        wait_until("the slave to say it waits for the lease",
                   lambda: "this broker is a slave" in slave.output(), 60, slave.output)
        assert "master@" in slave.output()  # it names the holder
        assert not slave.listening()  # a slave opens no connectors
        producers = Producers(master, "HA").start()
        wait_until("messages stored on the master", lambda: producers.count() >= 200, 60,
                   master.output)
        master.kill()
        producers.join()
        acked = list(producers.acked)
        # lease (2 s) + one acquire interval (2 s), with room for a slow machine
        slave.wait_listening(timeout=30)
        assert "this broker is now the master" in slave.output()
        got = drain(slave.stomp_port, "HA")
        check_exactly_once(acked, got)
        # the old master, restarted, is now the slave
        master.start(wait=False)
        wait_until("the restarted master to wait as a slave",
                   lambda: master.output().count("this broker is a slave") >= 1, 60,
                   master.output)
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
        wait_until("the second broker to wait", lambda: "is a slave" in second.output(), 60,
                   second.output)
        first.stop()  # releases the 60 s lease: no need to wait for it to expire
        second.wait_listening(timeout=30)
    finally:
        first.kill()
        second.stop()
