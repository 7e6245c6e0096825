"""Batch reads of a live destination and batch writes, on the session's local[2]
Spark; bad input fails the Spark job with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest
from brokers import BrokerProcess
from proton import Message
from relaymq_spark.client import Client, Endpoint

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]


def fill(url: str, dest: str, n: int) -> None:
    assert Client(Endpoint(url)).send(
        Message(body=f"m{i}", address=f"queue://{dest}", id=f"id-{i}", priority=i % 10,
                correlation_id=f"c{i}", properties={"region": "eu" if i % 2 else "us",
                                                    "amount": i * 1.5})
        for i in range(n)) == n


def test_batch_read_by_range_with_typed_properties(spark, broker) -> None:
    fill(broker.url, "LIVE", 3000)
    df = (spark.read.format("relaymq").option("url", broker.url).option("destination", "LIVE")
          .option("propertyColumns", "region:string,amount:double")
          .option("messagesPerPartition", "1000").load())
    assert df.rdd.getNumPartitions() == 3
    rows = df.orderBy("sequence").collect()
    assert [r.sequence for r in rows] == list(range(1, 3001))
    r = rows[7]
    assert (r.body_string, bytes(r.body), r.message_id, r.destination) == \
        ("m7", b"m7", "id-7", "queue://LIVE")
    assert (r.priority, r.correlation_id, r.region, r.amount) == (7, "c7", "eu", 10.5)
    assert r.properties == {"region": "eu", "amount": "10.5"}
    assert r.redelivered is False and r.timestamp is not None
    # a range by offsets, and nothing was consumed by reading
    part = (spark.read.format("relaymq").option("url", broker.url).option("destination", "LIVE")
            .option("startingOffsets", '{"LIVE": 100}').option("endingOffsets", '{"LIVE": 150}')
            .load())
    assert sorted(x.sequence for x in part.collect()) == list(range(101, 151))
    assert Client(Endpoint(broker.url)).bounds("LIVE") == (1, 3000)
    # a schema of the job's own: only those columns, typed properties among them
    few = (spark.read.format("relaymq").option("url", broker.url).option("destination", "LIVE")
           .option("propertyColumns", "region:string,amount:double")
           .schema("amount double, sequence long, body_string string").load())
    assert few.columns == ["amount", "sequence", "body_string"]
    assert sorted((r.sequence, r.body_string, r.amount) for r in few.collect())[:2] == \
        [(1, "m0", 0.0), (2, "m1", 1.5)]


def test_batch_write_then_read_back(spark, broker) -> None:
    df = spark.range(2000).selectExpr("concat('row-', id) as body", "id as n",
                                      "map('k', cast(id % 3 as string)) as properties")
    df.write.format("relaymq").option("url", broker.url).option("destination", "WRITTEN") \
        .option("writeId", "job-1").mode("append").save()
    # the same job again with the same writeId: the broker drops every copy
    df.write.format("relaymq").option("url", broker.url).option("destination", "WRITTEN") \
        .option("writeId", "job-1").mode("append").save()
    got = Client(Endpoint(broker.url)).read("WRITTEN", 0, 10_000)
    assert sorted(m.body for _, m in got) == sorted(f"row-{i}" for i in range(2000))
    m = next(m for _, m in got if m.body == "row-5")
    assert m.durable and m.properties["n"] == 5 and m.properties["k"] == "2"


def test_unknown_destination_fails_the_job(spark, broker) -> None:
    with pytest.raises(Exception, match="queue://MISSING does not exist"):
        spark.read.format("relaymq").option("url", broker.url) \
            .option("destination", "MISSING").load().collect()


def test_offset_older_than_retained_fails_the_job(spark, broker) -> None:
    fill(broker.url, "OLD", 50)
    Client(Endpoint(broker.url)).release("OLD", 20)
    with pytest.raises(Exception, match="offset 5 is older than what the broker retains"):
        spark.read.format("relaymq").option("url", broker.url).option("destination", "OLD") \
            .option("startingOffsets", '{"OLD": 5}').load().collect()
    rows = spark.read.format("relaymq").option("url", broker.url).option("destination", "OLD") \
        .load().collect()
    assert sorted(r.sequence for r in rows) == list(range(21, 51))
    # failOnDataLoss=false: what is gone is skipped, the read starts at the earliest held
    skipped = spark.read.format("relaymq").option("url", broker.url) \
        .option("destination", "OLD").option("startingOffsets", '{"OLD": 5}') \
        .option("failOnDataLoss", "false").load().collect()
    assert sorted(r.sequence for r in skipped) == list(range(21, 51))


def test_a_destination_left_out_of_ending_offsets_reads_to_latest(spark, broker) -> None:
    fill(broker.url, "END1", 30)
    fill(broker.url, "END2", 20)
    rows = (spark.read.format("relaymq").option("url", broker.url)
            .option("destination", "END1,END2").option("endingOffsets", '{"END1": 10}')
            .load().groupBy("destination").count().collect())
    assert {r.destination: r["count"] for r in rows} == {"queue://END1": 10, "queue://END2": 20}


def test_wrong_credentials_fail_the_job(spark, tmp_path: Path) -> None:
    auth = """<plugins><simpleAuthenticationPlugin anonymousAccessAllowed="false"><users>
      <authenticationUser username="app" password="secret" groups="apps"/>
    </users></simpleAuthenticationPlugin></plugins>"""
    b = BrokerProcess(tmp_path, extra=auth).start()
    try:
        good = Endpoint(b.url, user="app", password="secret")
        assert Client(good).send([Message(body="x", address="queue://SEC")]) == 1
        rows = spark.read.format("relaymq").option("url", b.url).option("user", "app") \
            .option("password", "secret").option("destination", "SEC").load().collect()
        assert [r.body_string for r in rows] == ["x"]
        with pytest.raises(Exception, match="authentication failed"):
            spark.read.format("relaymq").option("url", b.url).option("user", "app") \
                .option("password", "wrong").option("destination", "SEC").load().collect()
        # the sink too: the write fails with the reason, nothing is stored
        rows_df = spark.createDataFrame([("y",)], "body string")
        with pytest.raises(Exception, match="authentication failed"):
            rows_df.write.format("relaymq").option("url", b.url).option("user", "app") \
                .option("password", "wrong").option("destination", "SEC").mode("append").save()
        rows_df.write.format("relaymq").option("url", b.url).option("user", "app") \
            .option("password", "secret").option("destination", "SEC").mode("append").save()
        assert [m.body for _, m in Client(good).read("SEC", 0, 100)] == ["x", "y"]
    finally:
        b.stop()


def test_a_misspelled_option_fails_the_job_naming_the_option_meant(spark, broker) -> None:
    fill(broker.url, "SPELL", 10)
    with pytest.raises(Exception, match="unknown option 'startingoffset'; did you mean "
                                        "'startingOffsets'"):
        spark.read.format("relaymq").option("url", broker.url).option("destination", "SPELL") \
            .option("startingOffset", '{"SPELL": 5}').load().collect()
    df = spark.range(3).selectExpr("cast(id as string) as body")
    with pytest.raises(Exception, match="unknown option 'destinaton'; did you mean "
                                        "'destination'"):
        df.write.format("relaymq").option("url", broker.url) \
            .option("destinaton", "SPELL").mode("append").save()
    assert Client(Endpoint(broker.url)).bounds("SPELL") == (1, 10)  # nothing was sent
    # Spark's own options pass; the read by its right name works
    rows = spark.read.format("relaymq").option("url", broker.url).option("destination", "SPELL") \
        .option("startingOffsets", '{"SPELL": 5}').option("path", "ignored").load().collect()
    assert sorted(r.sequence for r in rows) == [6, 7, 8, 9, 10]
