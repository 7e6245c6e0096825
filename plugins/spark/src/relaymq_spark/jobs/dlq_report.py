"""`dlq-report`: dead letters by cause, origin destination and hour, as a table
(printed, and CSV) and a PNG chart (one bar per hour, stacked by cause)."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any

from relaymq_spark.jobs.chart import stacked_bars

CAUSES = ("x-opt-dlq-delivery-failure-cause", "dlq_delivery_failure_cause")
ORIGINS = ("x-opt-original-destination", "original_destination")


def dead_letters(spark: Any, *, options: dict[str, str] | None = None,
                 journal: str | None = None, destination: str = "ActiveMQ.DLQ") -> Any:
    """The dead-letter queue's messages: live from the broker, or from a kahaDB copy."""
    if journal is not None:
        from relaymq_spark.journal import live_messages

        return live_messages(spark, journal, destination=destination)
    return spark.read.format("relaymq").options(**(options or {})) \
        .option("destination", destination).load()


def report(df: Any) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    def first_of(keys: tuple[str, ...]) -> Any:
        return F.coalesce(*[F.col("headers").getItem(k) for k in keys], F.lit("unknown"))

    grouped = (df.select(first_of(CAUSES).alias("cause"), first_of(ORIGINS).alias("origin"),
                         F.date_format(F.date_trunc("hour", "timestamp"),
                                       "yyyy-MM-dd HH:00").alias("hour"))
               .groupBy("hour", "cause", "origin").count()
               .orderBy("hour", "cause", "origin"))
    return [r.asDict() for r in grouped.collect()]


def write(rows: list[dict[str, Any]], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    table = out / "dlq-report.csv"
    with open(table, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["hour", "cause", "origin", "count"])
        w.writeheader()
        w.writerows(rows)
    hours = sorted({str(r["hour"]) for r in rows})
    series: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        series[str(r["cause"])[:60]][str(r["hour"])] += r["count"]
    chart = stacked_bars(out / "dlq-report.png", "Dead letters per hour by cause", hours,
                         {k: dict(v) for k, v in series.items()}, "messages")
    return table, chart
