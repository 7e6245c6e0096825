"""`replay`: Parquet (an archive) back into a destination, with a rate limit and
a filter (a Spark SQL condition over the columns, selector-like:
``priority > 4 AND properties['region'] = 'eu'``).

Each message goes back as what it was: a text message (``body_type`` ``text``)
as an AMQP string (a JMS TextMessage for ActiveMQ/Artemis consumers), anything
else as binary (a BytesMessage). Archives without ``body_type`` (written before
the column existed) are replayed as binary."""

from __future__ import annotations

from typing import Any

COLUMNS = ("body", "properties", "priority", "message_id", "correlation_id", "type", "group_id",
           "body_type")


def replay(spark: Any, *, options: dict[str, str], source: str, destination: str | None,
           where: str | None = None, rate: float | None = None,
           write_id: str | None = None) -> int:
    """Send the archived messages (those matching `where`) to `destination` (default:
    each row's own `destination` column); returns how many were sent."""
    df = spark.read.parquet(source)
    if where:
        df = df.where(where)
    cols = [c for c in COLUMNS if c in df.columns]
    if destination is None:
        if "destination" not in df.columns:
            raise ValueError("replay: no --destination and no 'destination' column in the data")
        cols.append("destination")
    if "sequence" in df.columns:
        df = df.orderBy("destination", "sequence") if "destination" in df.columns \
            else df.orderBy("sequence")
    df = df.select(*cols)
    if rate:
        df = df.coalesce(1)  # one sender: the rate is the job's
    count = df.count()
    writer = df.write.format("relaymq").options(**options).mode("append")
    if destination is not None:
        writer = writer.option("destination", destination)
    if rate:
        writer = writer.option("maxRate", str(rate))
    if write_id:
        writer = writer.option("writeId", write_id)
    writer.save()
    return int(count)
