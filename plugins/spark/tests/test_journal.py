"""`format("relaymq-journal")` over a kahaDB directory copied from a broker killed
with SIGKILL: one partition per journal file, no lock taken."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from brokers import BrokerProcess
from proton import Message
from relaymq_spark.client import Client, Endpoint
from relaymq_spark.journal import live_messages

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]


def test_journal_of_a_killed_broker(spark, tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    b = BrokerProcess(tmp_path / "b").start()
    try:
        c = Client(Endpoint(b.url))
        c.send(Message(body=f"a{i}", address="queue://JA", properties={"n": i}) for i in range(1500))
        c.send(Message(body=f"b{i}", address="queue://JB") for i in range(700))
        c.release("JA", 500)  # 500 acknowledged: removal records in the journal
        b.kill()
    finally:
        b.stop()
    copy = tmp_path / "copy"
    shutil.copytree(b.data, copy)
    # a lock file as a running broker would hold it does not matter to the reader
    df = spark.read.format("relaymq-journal").option("propertyColumns", "n:long").load(str(copy))
    assert df.rdd.getNumPartitions() == len(list(copy.glob("db-*.log")))
    rows = df.where("destination = 'queue://JA'").select("sequence", "body_string", "n").collect()
    assert sorted(r.sequence for r in rows) == list(range(1, 1501))
    assert {r.body_string for r in rows} == {f"a{i}" for i in range(1500)}
    assert all(r.n == r.sequence - 1 for r in rows)
    removals = spark.read.format("relaymq-journal").option("what", "removals").load(str(copy))
    assert removals.where("destination = 'queue://JA'").count() == 500
    live = live_messages(spark, str(copy))
    counts = {r["destination"]: r["count"] for r in live.groupBy("destination").count().collect()}
    assert counts == {"queue://JA": 1000, "queue://JB": 700}
    only_b = spark.read.format("relaymq-journal").option("destination", "JB").load(str(copy))
    assert only_b.count() == 700
    # the job's own schema picks the columns read, in its order
    picked = (spark.read.format("relaymq-journal").option("propertyColumns", "n:long")
              .schema("n long, sequence long, journal_file int").option("destination", "JA")
              .load(str(copy)))
    assert picked.columns == ["n", "sequence", "journal_file"]
    got = picked.collect()
    assert sorted(r.sequence for r in got) == list(range(1, 1501))
    assert all(r.n == r.sequence - 1 and r.journal_file >= 1 for r in got)
    runs = (spark.read.format("relaymq-journal").option("what", "removals")
            .schema("sequence long, destination string").load(str(copy)))
    assert sorted(r.sequence for r in runs.where("destination = 'queue://JA'").collect()) == \
        list(range(1, 501))


def test_journal_errors_are_clear(spark, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no journal files"):
        spark.read.format("relaymq-journal").load(str(tmp_path)).collect()
    with pytest.raises(Exception, match="relaymq-journal: unknown option 'destinations'; "
                                        "did you mean 'destination'"):
        spark.read.format("relaymq-journal").option("destinations", "A,B") \
            .load(str(tmp_path)).collect()
    with pytest.raises(Exception, match="does not have; its columns are: body binary"):
        spark.read.format("relaymq-journal").schema("sequence long, payload binary") \
            .load(str(tmp_path)).collect()
    with pytest.raises(Exception, match="column 'sequence' is bigint here, the schema asks "
                                        "for string"):
        spark.read.format("relaymq-journal").schema("sequence string") \
            .load(str(tmp_path)).collect()
