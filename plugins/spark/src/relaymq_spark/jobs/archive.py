"""`archive`: a destination to Parquet partitioned by date, exactly once and
resumable: a streaming query run until everything available is written
(`availableNow`), with its checkpoint next to the output; run it again (or on a
schedule) and it goes on where it stopped. What it archived is released on the
broker (the source's commit) unless `keep` is set."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def archive(spark: Any, *, options: dict[str, str], destination: str, out: str,
            checkpoint: str | None = None, keep: bool = False,
            max_per_trigger: int | None = None) -> int:
    """Run the archive; returns how many messages this run wrote."""
    from pyspark.sql import functions as F

    reader = spark.readStream.format("relaymq").options(**options) \
        .option("destination", destination).option("releaseOnCommit", str(not keep).lower())
    if max_per_trigger:
        reader = reader.option("maxMessagesPerTrigger", str(max_per_trigger))
    df = reader.load().withColumn("date", F.to_date("timestamp"))
    chk = checkpoint or str(Path(out).with_name(Path(out).name + ".checkpoint"))
    query = (df.writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", chk).partitionBy("date")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return sum(int(p.get("numInputRows", 0)) for p in query.recentProgress)
