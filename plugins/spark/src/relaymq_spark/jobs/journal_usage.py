"""`journal-usage`: which destinations and subscriptions hold live messages in
which journal file (the files are in time order: older files first), from an
offline kahaDB directory: how many, the bytes of their bodies (a journal file
is only deleted once none of its messages is live), the time span. A table
(printed, and CSV) and a PNG chart. The bodies are what a destination's messages
say; each record also holds its headers, properties and framing, so the disk a
file takes is more (management's `store_used` gives a destination's total)."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any

from relaymq_spark.jobs.chart import stacked_bars

#: the table's columns
FIELDS = ["journal_file", "destination", "messages", "body_bytes", "oldest", "newest"]


def usage(spark: Any, journal: str) -> list[dict[str, Any]]:
    from pyspark.sql import functions as F

    from relaymq_spark.journal import live_messages

    live = live_messages(spark, journal)
    grouped = (live.groupBy("journal_file", "destination")
               .agg(F.count("*").alias("messages"),
                    F.sum(F.length("body")).alias("body_bytes"),
                    F.date_format(F.min("timestamp"), "yyyy-MM-dd HH:mm:ss").alias("oldest"),
                    F.date_format(F.max("timestamp"), "yyyy-MM-dd HH:mm:ss").alias("newest"))
               .orderBy("journal_file", F.desc("body_bytes")))
    return [r.asDict() for r in grouped.collect()]


def write(rows: list[dict[str, Any]], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    table = out / "journal-usage.csv"
    with open(table, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    files = sorted({int(r["journal_file"]) for r in rows})
    xs = [f"db-{n}.log" for n in files]
    series: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        series[str(r["destination"])][f"db-{r['journal_file']}.log"] = \
            float(r["body_bytes"] or 0) / 1024
    chart = stacked_bars(out / "journal-usage.png", "Live messages' body bytes per journal file",
                         xs, dict(series), "KiB of bodies")
    return table, chart
