"""`format("relaymq-jdbc")` over a real JDBC store written by a broker: SQLite,
and PostgreSQL (relaymq-jdbc's session server, `postgres_url`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from brokers import BrokerProcess
from proton import Message
from relaymq_spark.client import Client, Endpoint

pytestmark = [pytest.mark.spark, pytest.mark.external("postgres"), pytest.mark.timeout(900)]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_jdbc_store_in_id_ranges(spark, store_url: str, tmp_path: Path) -> None:
    url = store_url
    b = BrokerProcess(tmp_path, persistence=f'<jdbcPersistenceAdapter url="{url}"/>').start()
    try:
        c = Client(Endpoint(b.url))
        assert c.send(Message(body=f"j{i}", address="queue://JQ", properties={"n": i})
                      for i in range(1200)) == 1200
        assert c.send(Message(body=f"k{i}", address="queue://KQ") for i in range(300)) == 300
        c.release("JQ", 200)
    finally:
        b.stop()
    df = (spark.read.format("relaymq-jdbc").option("url", url).option("partitions", "3")
          .option("propertyColumns", "n:long").load())
    assert df.rdd.getNumPartitions() == 3
    rows = df.where("destination = 'queue://JQ'").select("sequence", "body_string", "n").collect()
    assert sorted(r.sequence for r in rows) == list(range(201, 1201))
    assert all(r.body_string == f"j{r.n}" and r.n == r.sequence - 1 for r in rows)
    only_k = spark.read.format("relaymq-jdbc").option("url", url).option("destination", "KQ") \
        .load()
    assert only_k.count() == 300
    ids = (spark.read.format("relaymq-jdbc").option("url", url).option("destination", "KQ")
           .schema("id long, body_string string").load().collect())
    assert sorted(r.body_string for r in ids) == sorted(f"k{i}" for i in range(300))
    assert len({r.id for r in ids}) == 300


def test_a_wrong_sqlite_path_fails_clearly_and_creates_nothing(spark, tmp_path: Path) -> None:
    missing = tmp_path / "nope.sqlite"
    with pytest.raises(Exception, match="no SQLite database at"):
        spark.read.format("relaymq-jdbc").option("url", f"sqlite:///{missing}").load().collect()
    assert not missing.exists()  # read-only: the reader never makes a database
