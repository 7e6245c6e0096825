"""Ready Spark jobs (`relaymq spark JOB`, `python -m relaymq_spark JOB`, or
`spark-submit` of ``relaymq_spark/__main__.py``). Each job is a function taking
a SparkSession, so it can also be called from a notebook."""

from __future__ import annotations

import os
import sys
from typing import Any


def session(master: str | None, app: str) -> Any:
    """The active SparkSession (spark-submit's), or a new one on `master`
    (default ``local[*]``), with RelayMQ's data sources registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import relaymq_spark

    active = SparkSession.getActiveSession()
    if active is None:
        builder = SparkSession.builder.appName(app)
        if master:
            builder = builder.master(master)
        elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit (its master wins)
            builder = builder.master(os.environ.get("SPARK_MASTER", "local[*]"))
        active = builder.getOrCreate()
    relaymq_spark.register(active)
    return active


def reader_options(url: str, user: str | None, password: str | None) -> dict[str, str]:
    out = {"url": url}
    if user:
        out["user"] = user
    if password:
        out["password"] = password
    return out


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A plain-text table (what the jobs print)."""
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)
