"""`relaymq spark JOB` (and `python -m relaymq_spark JOB`): the ready Spark jobs."""

from __future__ import annotations

import click


@click.group(name="spark")
def spark() -> None:
    """Ready Spark jobs over RelayMQ data (docs/spark.md#ready-jobs)."""
