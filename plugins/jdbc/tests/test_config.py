"""activemq.xml as ActiveMQ users write it: Spring data-source beans, lockers, bad values."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from relaymq.config import load_config_text
from relaymq.errors import ConfigError
from relaymq_jdbc import JDBCPersistenceAdapter
from relaymq_jdbc.testing import PostgresCluster

SPRING = ('xmlns="http://www.springframework.org/schema/beans" '
          'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"')


def document(adapter: str, beans: str = "", data: str = "/var/lib/relaymq") -> str:
    return f"""<beans {SPRING}>
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="b1" dataDirectory="{data}">
    <persistenceAdapter>{adapter}</persistenceAdapter>
  </broker>
  {beans}
</beans>"""


def build(text: str, data: str = "/var/lib/relaymq") -> JDBCPersistenceAdapter:
    config = load_config_text(text, filename="activemq.xml")
    assert config.persistence_adapter is not None
    broker = SimpleNamespace(config=config)
    return JDBCPersistenceAdapter.from_element(config.persistence_adapter, broker)


def test_pg_pooling_data_source_bean() -> None:
    store = build(document(
        '<jdbcPersistenceAdapter dataSource="#postgres-ds" lockKeepAlivePeriod="5000">'
        '<locker><lease-database-locker lockAcquireSleepInterval="10000"/></locker>'
        '</jdbcPersistenceAdapter>',
        '<bean id="postgres-ds" class="org.postgresql.ds.PGPoolingDataSource">'
        '<property name="serverName" value="db.example"/>'
        '<property name="portNumber" value="5433"/>'
        '<property name="databaseName" value="activemq"/>'
        '<property name="user" value="amq"/>'
        '<property name="password"><value>s3cret/@</value></property>'
        '<property name="maxConnections" value="100"/></bean>'))
    u = store.url
    assert (u.drivername, u.host, u.port, u.database, u.username, u.password) == (
        "postgresql+psycopg", "db.example", 5433, "activemq", "amq", "s3cret/@")
    assert store.config.lease_ms == 10000 and store.config.keep_alive_ms == 5000
    assert "s3cret" not in store.describe()


def test_pg_simple_data_source_defaults_to_localhost() -> None:
    store = build(document(
        '<jdbcPersistenceAdapter dataSource="#ds"/>',
        '<bean id="ds" class="org.postgresql.ds.PGSimpleDataSource">'
        '<property name="databaseName" value="amq"/></bean>'))
    assert (store.url.host, store.url.port, store.url.database) == ("localhost", None, "amq")


@pytest.mark.parametrize("cls", ["org.apache.commons.dbcp2.BasicDataSource",
                                 "org.apache.commons.dbcp.BasicDataSource"])
def test_dbcp_basic_data_source_with_jdbc_url(cls: str) -> None:
    store = build(document(
        '<jdbcPersistenceAdapter dataSource="#pg"/>',
        f'<bean id="pg" class="{cls}" destroy-method="close">'
        '<property name="driverClassName" value="org.postgresql.Driver"/>'
        '<property name="url" value="jdbc:postgresql://pg.local:6543/broker?ssl=false"/>'
        '<property name="username" value="activemq"/>'
        '<property name="password" value="pw"/>'
        '<property name="maxTotal" value="200"/>'
        '<property name="poolPreparedStatements" value="true"/></bean>'))
    u = store.url
    assert (u.host, u.port, u.database, u.username, u.password) == (
        "pg.local", 6543, "broker", "activemq", "pw")


def test_derby_embedded_becomes_sqlite_in_the_data_directory(tmp_path: Path) -> None:
    store = build(document(
        '<jdbcPersistenceAdapter dataSource="#derby-ds"/>',
        '<bean id="derby-ds" class="org.apache.derby.jdbc.EmbeddedDataSource">'
        '<property name="databaseName" value="derbydb"/>'
        '<property name="createDatabase" value="create"/></bean>', data=str(tmp_path)),
        data=str(tmp_path))
    assert store.url.get_backend_name() == "sqlite"
    assert store.url.database == str(tmp_path / "jdbc" / "derbydb.sqlite")


def test_no_data_source_is_sqlite_in_the_data_directory(tmp_path: Path) -> None:
    store = build(document("<jdbcPersistenceAdapter/>", data=str(tmp_path)))
    assert store.url.database == str(tmp_path / "jdbc" / "activemq.sqlite")


def test_url_attribute_and_yaml() -> None:
    store = build(document('<jdbcPersistenceAdapter url="postgresql://u:p@h/db" tablePrefix="AMQ_"/>'))
    assert store.url.drivername == "postgresql+psycopg"
    assert store.schema.msgs.name == "AMQ_ACTIVEMQ_MSGS"
    yaml = """broker:
  brokerName: b1
  persistenceAdapter:
    jdbcPersistenceAdapter: {url: "sqlite:////tmp/x.sqlite", lockKeepAlivePeriod: 2000}
"""
    config = load_config_text(yaml, "yaml")
    assert config.persistence_adapter is not None
    y = JDBCPersistenceAdapter.from_element(config.persistence_adapter, SimpleNamespace(config=config))
    assert y.url.database == "/tmp/x.sqlite" and y.config.lock_keep_alive_period == 2000


def test_a_referenced_bean_is_not_reported_as_ignored() -> None:
    text = document('<jdbcPersistenceAdapter dataSource="#ds"/>',
                    '<bean id="ds" class="org.postgresql.ds.PGSimpleDataSource"/>'
                    '<bean id="other" class="com.example.Thing"/>')
    warnings = load_config_text(text).warnings
    assert not any('"org.postgresql.ds.PGSimpleDataSource"' in w for w in warnings)
    assert any('"com.example.Thing"' in w for w in warnings)


@pytest.mark.parametrize(("adapter", "beans", "expected"), [
    ('<jdbcPersistenceAdapter dataSource="#mysql-ds"/>',
     '<bean id="mysql-ds" class="org.apache.commons.dbcp2.BasicDataSource">'
     '<property name="url" value="jdbc:mysql://localhost/activemq"/></bean>',
     "the 'mysql' database is not supported"),
    ('<jdbcPersistenceAdapter dataSource="#oracle-ds"/>',
     '<bean id="oracle-ds" class="oracle.jdbc.pool.OracleDataSource"/>',
     "data source class 'oracle.jdbc.pool.OracleDataSource' is not supported; supported: "
     "org.postgresql.ds.PGPoolingDataSource"),
    ('<jdbcPersistenceAdapter dataSource="#missing"/>', "",
     "no <bean id=\"missing\"> in the configuration file"),
    ('<jdbcPersistenceAdapter url="mysql://localhost/x"/>', "",
     "RelayMQ's JDBC store runs on PostgreSQL and SQLite"),
    ('<jdbcPersistenceAdapter cleanupPeriod="-5"/>', "", "cleanupPeriod=-5: must not be negative"),
    ('<jdbcPersistenceAdapter><locker><shared-file-locker/></locker></jdbcPersistenceAdapter>', "",
     "it takes one of <lease-database-locker>, <database-locker>"),
    ('<jdbcPersistenceAdapter lockKeepAlivePeriod="soon"/>', "", "lockKeepAlivePeriod=\"soon\""),
])
def test_bad_config_is_one_clear_line(adapter: str, beans: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(document(adapter, beans))
    text = str(info.value)
    assert expected in text
    assert len(text.splitlines()) == 1, text
    assert "activemq.xml:" in text


async def test_bad_credentials_fail_at_start_with_one_line(postgres: PostgresCluster) -> None:
    store = JDBCPersistenceAdapter(url=postgres.url().replace("relaymq@", "nobody@"))
    with pytest.raises(Exception) as info:
        await store.start()
    text = str(info.value)
    assert "cannot open the JDBC store" in text and "nobody" in text
    assert len(text.splitlines()) == 1, text


async def test_unreachable_server_fails_at_start_without_a_locker(tmp_path: Path) -> None:
    from relaymq_jdbc.testing import _free_port

    store = JDBCPersistenceAdapter(url=f"postgresql+psycopg://u@127.0.0.1:{_free_port()}/db",
                                   use_database_lock=False)
    with pytest.raises(Exception) as info:
        await store.start()
    assert "cannot open the JDBC store" in str(info.value)
    assert "refused" in str(info.value).lower() or "connect" in str(info.value).lower()


async def test_an_unreachable_server_is_waited_for_with_a_locker(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A master/slave pair's broker waits for its database (as ActiveMQ's lockers)."""
    import asyncio

    from relaymq.testing.waits import wait_until_async

    from .silent_server import SilentServer

    down = SilentServer()
    try:
        store = JDBCPersistenceAdapter(url=f"postgresql+psycopg://u@127.0.0.1:{down.port}/db")
        store.config.locker.lock_acquire_sleep_interval = 100
        starting = asyncio.ensure_future(store.start())
        await wait_until_async(lambda: down.accepted >= 5, "five tries of the database", 30)
        assert not starting.done()
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        waits = [r.getMessage() for r in caplog.records if "cannot be reached" in r.getMessage()]
        assert len(waits) == 1 and "retrying every 100 ms" in waits[0], waits
    finally:
        down.close()


async def test_tables_of_another_program_are_refused(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "amq.sqlite"
    with sqlite3.connect(db) as conn:  # ActiveMQ's own table, without RelayMQ's SEQ column
        conn.execute("CREATE TABLE ACTIVEMQ_MSGS(ID INTEGER NOT NULL, CONTAINER VARCHAR(250), "
                     "MSGID_PROD VARCHAR(250), MSGID_SEQ INTEGER, EXPIRATION BIGINT, MSG BLOB, "
                     "PRIMARY KEY (ID))")
    store = JDBCPersistenceAdapter(url=f"sqlite:///{db}")
    with pytest.raises(Exception) as info:
        await store.start()
    text = str(info.value)
    assert "ACTIVEMQ_MSGS lacks the column(s) SEQ" in text and "tablePrefix" in text


async def test_the_default_store_is_created_with_its_directory(tmp_path: Path) -> None:
    from relaymq.model.destination import Destination
    from relaymq.model.message import Message
    from relaymq.spi.persistence import AddDestination, AddMessage

    data = tmp_path / "not-yet"  # a first start: the data directory is made, as for kahaDB
    store = build(document("<jdbcPersistenceAdapter/>", data=str(data)))
    await store.start()
    try:
        m = Message(b"x", destination=Destination.parse("queue://Q"), message_id="ID:a-1",
                    durable=True)
        await store.write([AddDestination("queue://Q"), AddMessage("queue://Q", 1, m)])
    finally:
        await store.stop()
    assert (data / "jdbc" / "activemq.sqlite").is_file()
