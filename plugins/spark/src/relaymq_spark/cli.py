"""`relaymq spark JOB` (and `python -m relaymq_spark JOB`): the ready Spark jobs.

Each job runs on the active SparkSession (under `spark-submit`) or starts one on
`--master` (default ``local[*]``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

_broker = [
    click.option("--url", required=True, help="the broker, amqp://host:port or amqps://"),
    click.option("--user", default=None, help="SASL PLAIN user"),
    click.option("--password", default=None, help="SASL PLAIN password"),
]
_master = click.option("--master", default=None,
                       help="Spark master when not run by spark-submit (default local[*])")


def _with(options: list[Any]) -> Any:
    def wrap(fn: Any) -> Any:
        for opt in reversed(options):
            fn = opt(fn)
        return fn
    return wrap


@click.group(name="spark", context_settings={"help_option_names": ["-h", "--help"]})
def spark() -> None:
    """Ready Spark jobs over RelayMQ data (docs/spark.md#ready-jobs)."""


@spark.command(name="dlq-report")
@click.option("--url", default=None, help="read the dead-letter queue from this broker")
@click.option("--user", default=None)
@click.option("--password", default=None)
@click.option("--journal", default=None, type=click.Path(exists=True, file_okay=False),
              help="read it from an offline kahaDB directory instead")
@click.option("--destination", default="ActiveMQ.DLQ", show_default=True)
@click.option("--out", default="dlq-report", show_default=True, type=click.Path(file_okay=False),
              help="directory for dlq-report.csv and dlq-report.png")
@_master
def dlq_report_cmd(url: str | None, user: str | None, password: str | None, journal: str | None,
                   destination: str, out: str, master: str | None) -> None:
    """Dead letters by cause, origin destination and hour: a table and a PNG chart."""
    from relaymq_spark.jobs import print_table, reader_options, session
    from relaymq_spark.jobs.dlq_report import dead_letters, report, write

    if (url is None) == (journal is None):
        raise click.UsageError("give --url (a live broker) or --journal (a kahaDB directory)")
    s = session(master, "relaymq dlq-report")
    df = dead_letters(s, options=reader_options(url, user, password) if url else None,
                      journal=journal, destination=destination)
    rows = report(df)
    table, chart = write(rows, Path(out))
    click.echo(print_table(rows, ["hour", "cause", "origin", "count"]))
    click.echo(f"\n{sum(r['count'] for r in rows)} dead letters; table {table}, chart {chart}")


@spark.command(name="archive")
@_with(_broker)
@click.option("--destination", required=True, help="the queue (or durable://CLIENT:NAME)")
@click.option("--out", required=True, help="Parquet directory (partitioned by date)")
@click.option("--checkpoint", default=None, help="default: OUT.checkpoint next to it")
@click.option("--keep", is_flag=True, help="do not release archived messages on the broker")
@click.option("--max-per-trigger", type=int, default=None)
@_master
def archive_cmd(url: str, user: str | None, password: str | None, destination: str, out: str,
                checkpoint: str | None, keep: bool, max_per_trigger: int | None,
                master: str | None) -> None:
    """A destination to Parquet by date, exactly once, resumable."""
    from relaymq_spark.jobs import reader_options, session
    from relaymq_spark.jobs.archive import archive

    s = session(master, "relaymq archive")
    n = archive(s, options=reader_options(url, user, password), destination=destination,
                out=out, checkpoint=checkpoint, keep=keep, max_per_trigger=max_per_trigger)
    click.echo(f"archived {n} messages of {destination} to {out}")


@spark.command(name="replay")
@_with(_broker)
@click.option("--source", required=True, help="Parquet written by `archive` (or alike)")
@click.option("--destination", default=None, help="default: each row's own destination")
@click.option("--where", default=None,
              help="a Spark SQL condition, e.g. \"priority > 4 AND properties['k'] = 'v'\"")
@click.option("--rate", type=float, default=None, help="at most this many messages per second")
@click.option("--write-id", default=None,
              help="a fixed id makes a re-run of the same replay send nothing twice")
@_master
def replay_cmd(url: str, user: str | None, password: str | None, source: str,
               destination: str | None, where: str | None, rate: float | None,
               write_id: str | None, master: str | None) -> None:
    """Parquet back into a destination, with a rate limit and a filter."""
    from relaymq_spark.jobs import reader_options, session
    from relaymq_spark.jobs.replay import replay

    s = session(master, "relaymq replay")
    n = replay(s, options=reader_options(url, user, password), source=source,
               destination=destination, where=where, rate=rate, write_id=write_id)
    click.echo(f"replayed {n} messages")


@spark.command(name="journal-usage")
@click.argument("journal", type=click.Path(exists=True, file_okay=False))
@click.option("--out", default="journal-usage", show_default=True,
              type=click.Path(file_okay=False))
@_master
def journal_usage_cmd(journal: str, out: str, master: str | None) -> None:
    """Which destinations and subscriptions hold live messages in which journal
    file: how many, their bodies' bytes, their time span."""
    from relaymq_spark.jobs import print_table, session
    from relaymq_spark.jobs.journal_usage import FIELDS, usage, write

    s = session(master, "relaymq journal-usage")
    rows = usage(s, journal)
    table, chart = write(rows, Path(out))
    click.echo(print_table(rows, FIELDS))
    click.echo(f"\ntable {table}, chart {chart}")
