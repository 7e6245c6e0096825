"""A database that goes away for a while: the affected sends fail with an error to
their producers, the broker keeps running, and once the database is back sends
are stored again; nothing committed is lost. A connection the database dropped
while the broker was idle costs no send at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection, SendException
from relaymq.testing.blocking_stomp import BlockingStomp, drain_queue
from relaymq_jdbc.testing import PostgresCluster, PostgresUnavailable

from .brokers import BrokerProcess

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")


@pytest.fixture
def own_postgres(postgres: PostgresCluster) -> PostgresCluster:  # noqa: ARG001 - same skip rules
    """A server of this test's own: it is stopped and started again."""
    try:
        cluster = PostgresCluster().start()
    except PostgresUnavailable as exc:  # pragma: no cover - the session server started
        pytest.fail(str(exc))
    yield cluster  # type: ignore[misc]
    cluster.stop()


@pytest.mark.slow
def test_sends_fail_while_the_database_is_down_and_work_again_after(
        tmp_path: Path, own_postgres: PostgresCluster) -> None:
    url = own_postgres.url(own_postgres.create_database())
    broker = BrokerProcess(tmp_path, url, "outage", adapter='useLock="false"').start()
    try:
        client = BlockingStomp(broker.stomp_port)
        assert client.send("/queue/O", b"before")[0] == "RECEIPT"
        own_postgres.stop_server()  # a restart while the broker is idle costs no send
        own_postgres.start_server()
        cmd, headers, _body = client.send("/queue/O", b"after a restart")
        assert cmd == "RECEIPT", headers.get("message")
        own_postgres.stop_server()
        cmd, headers, _body = client.send("/queue/O", b"during")
        assert cmd == "ERROR", (cmd, headers)
        assert "the JDBC store could not store this" in headers["message"]
        amqp = BlockingConnection(f"amqp://127.0.0.1:{broker.amqp_port}", timeout=10)
        with pytest.raises(SendException) as info:  # rejected, with the store's words
            amqp.create_sender("queue://O").send(Message(body="during (amqp)", durable=True))
        assert info.value.state == Delivery.REJECTED
        amqp.close()
        assert broker.proc is not None and broker.proc.poll() is None  # still running
        own_postgres.start_server()
        cmd, headers, _body = client.send("/queue/O", b"after")
        assert cmd == "RECEIPT", (cmd, headers)
        got = drain_queue(broker.stomp_port, "O")
    finally:
        broker.stop()
    assert got == ["before", "after a restart", "after"]
    assert "Traceback" not in broker.output()


def terminate_store_backends(cluster: PostgresCluster, db: str) -> int:
    """End every server process of `db` (the broker's connections), as a DBA's
    pg_terminate_backend or a server-side idle timeout does; how many were ended."""
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=cluster.port, user="relaymq", dbname="postgres",
                         autocommit=True) as conn:
        return len([r for r in conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()", (db,)) if r[0]])


def test_a_send_after_the_database_dropped_the_connection_succeeds(
        tmp_path: Path, postgres: PostgresCluster) -> None:
    db = postgres.create_database()
    broker = BrokerProcess(tmp_path, postgres.url(db), "dropped").start()
    try:
        client = BlockingStomp(broker.stomp_port)
        assert client.send("/queue/D", b"one")[0] == "RECEIPT"
        assert terminate_store_backends(postgres, db) >= 1
        cmd, headers, _body = client.send("/queue/D", b"two")
        assert cmd == "RECEIPT", headers.get("message")  # the first send after the drop
        assert terminate_store_backends(postgres, db) >= 1
        amqp = BlockingConnection(f"amqp://127.0.0.1:{broker.amqp_port}", timeout=10)
        try:  # returns once accepted; a rejected transfer raises SendException
            amqp.create_sender("queue://D").send(Message(body="three", durable=True))
        finally:
            amqp.close()
        got = drain_queue(broker.stomp_port, "D")
        assert broker.alive()  # still the master: the lease held throughout
    finally:
        broker.stop()
    assert got == ["one", "two", "three"]
    assert "Traceback" not in broker.output()
