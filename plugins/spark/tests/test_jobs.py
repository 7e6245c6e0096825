"""The ready jobs on the session's Spark, against a real broker: dlq-report,
archive (resumable), replay (filter, rate), journal-usage; and one of them
through `relaymq spark` in a child process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from jvm_options import submit_env
from proton import Message
from proton.utils import BlockingConnection
from relaymq_spark.client import Client, Endpoint
from relaymq_spark.jobs.archive import archive
from relaymq_spark.jobs.dlq_report import dead_letters, report
from relaymq_spark.jobs.dlq_report import write as write_dlq
from relaymq_spark.jobs.journal_usage import usage
from relaymq_spark.jobs.journal_usage import write as write_usage
from relaymq_spark.jobs.replay import replay

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

PNG = b"\x89PNG\r\n\x1a\n"


def send(url: str, dest: str, n: int, start: int = 0) -> None:
    assert Client(Endpoint(url)).send(
        Message(body=f"{dest}-{i}", address=f"queue://{dest}",
                properties={"region": "eu" if i % 3 == 0 else "us"}, priority=i % 10)
        for i in range(start, start + n)) == n


def reject_all(url: str, dest: str, n: int) -> None:
    conn = BlockingConnection(url)
    try:
        rcv = conn.create_receiver(f"queue://{dest}", credit=n)
        for _ in range(n):
            rcv.receive(timeout=30)
            rcv.reject()
    finally:
        conn.close()


def test_dlq_report(spark, broker, tmp_path: Path) -> None:
    send(broker.url, "ORDERS", 10)
    send(broker.url, "PAYMENTS", 6)
    reject_all(broker.url, "ORDERS", 10)
    reject_all(broker.url, "PAYMENTS", 6)
    rows = report(dead_letters(spark, options={"url": broker.url}))
    by_origin: dict[str, int] = {}
    for r in rows:
        by_origin[r["origin"]] = by_origin.get(r["origin"], 0) + r["count"]
        assert r["hour"] and r["cause"]
    assert by_origin == {"queue://ORDERS": 10, "queue://PAYMENTS": 6}
    table, chart = write_dlq(rows, tmp_path / "report")
    assert "queue://ORDERS" in table.read_text()
    assert chart.read_bytes()[:8] == PNG


def test_archive_resumes_and_replay_filters(spark, broker, tmp_path: Path) -> None:
    send(broker.url, "ARC", 300)
    out = str(tmp_path / "archive")
    opts = {"url": broker.url}
    assert archive(spark, options=opts, destination="ARC", out=out) == 300
    assert list(Path(out).glob("date=*"))  # partitioned by date
    assert archive(spark, options=opts, destination="ARC", out=out) == 0  # resumed: nothing new
    send(broker.url, "ARC", 50, start=300)
    assert archive(spark, options=opts, destination="ARC", out=out) == 50
    df = spark.read.parquet(out)
    assert sorted(r.sequence for r in df.collect()) == list(range(1, 351))

    n = replay(spark, options=opts, source=out, destination="BACK",
               where="properties['region'] = 'eu' AND priority < 5", rate=500.0)
    expected = sorted(f"ARC-{i}" for i in range(350) if i % 3 == 0 and i % 10 < 5)
    assert n == len(expected)
    got = Client(Endpoint(broker.url)).read("BACK", 0, 10_000)
    # text messages come back as text (AMQP strings: JMS TextMessages), not binary
    assert sorted(m.body for _, m in got) == expected
    assert all(isinstance(m.body, str) for _, m in got)
    assert all(m.properties["region"] == "eu" for _, m in got)


def test_journal_usage(spark, broker, tmp_path: Path) -> None:
    send(broker.url, "BIG", 400)
    send(broker.url, "SMALL", 40)
    Client(Endpoint(broker.url)).release("BIG", 100)
    broker.stop()
    rows = usage(spark, str(broker.data))
    per_dest: dict[str, int] = {}
    for r in rows:
        per_dest[r["destination"]] = per_dest.get(r["destination"], 0) + r["messages"]
    assert per_dest == {"queue://BIG": 300, "queue://SMALL": 40}
    small = sum(r["body_bytes"] for r in rows if r["destination"] == "queue://SMALL")
    assert small == sum(len(f"SMALL-{i}") for i in range(40))
    table, chart = write_usage(rows, tmp_path / "usage")
    assert chart.read_bytes()[:8] == PNG and "queue://BIG" in table.read_text()


@pytest.mark.slow
def test_journal_usage_command(broker, tmp_path: Path) -> None:
    send(broker.url, "CLI", 25)
    broker.stop()
    relaymq = str(Path(sys.executable).with_name("relaymq"))
    done = subprocess.run([relaymq, "spark", "journal-usage", str(broker.data), "--out",
                           str(tmp_path / "u"), "--master", "local[1]"],
                          capture_output=True, text=True, timeout=600, env=submit_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "queue://CLI" in done.stdout and (tmp_path / "u" / "journal-usage.png").exists()


@pytest.mark.parametrize("command", [["relaymq", "spark"], ["python", "-m", "relaymq_spark"]])
def test_both_commands_take_dash_h(command: list[str]) -> None:
    exe = Path(sys.executable)
    argv = [str(exe.with_name(command[0])) if command[0] == "relaymq" else str(exe), *command[1:]]
    for extra in ([], ["archive"]):
        done = subprocess.run([*argv, *extra, "-h"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "Usage:" in done.stdout and ("archive" in done.stdout)
