"""A Spark driver for crash tests, run as a child process with the venv's python:

    stream_driver.py source URL DEST OUT CHECKPOINT MODE MAX [GO]
        RelayMQ queue -> Parquet (MODE "run": until killed; "finish": all available, then exit)
    stream_driver.py sink URL DEST DATA CHECKPOINT MODE MAX [GO]
        rows (the Parquet files the test puts in DATA, as a file stream) -> RelayMQ queue

With GO it is a standby (driver_runs.py): it builds its session and runs the same
kind of query once on a few rows of its own (another queue, another checkpoint,
in a scratch directory), so that its JVM, its Python workers and the source's
runner are up; then it writes GO.ready and starts the real query once GO exists.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any


def query(spark: Any, role: str, url: str, dest: str, data: str, checkpoint: str,
          most: str) -> Any:
    """The stream of `role`, not started."""
    if role == "source":
        return (spark.readStream.format("relaymq").option("url", url)
                .option("destination", dest).option("maxMessagesPerTrigger", most).load()
                .select("sequence", "body_string", "message_id")
                .writeStream.format("parquet").option("path", data)
                .option("checkpointLocation", checkpoint))
    schema = "n long, body string"
    return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
            .parquet(data).selectExpr("body", "n")
            .writeStream.format("relaymq").option("url", url).option("destination", dest)
            .option("checkpointLocation", checkpoint))


def warm_up(spark: Any, role: str, url: str, most: str) -> None:
    """The same kind of query, to its end, on a few rows of a scratch queue."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from proton import Message
    from relaymq_spark.client import Client, Endpoint

    dest = f"WARMUP.{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="relaymq-warm-up-") as scratch:
        data = Path(scratch) / "data"
        data.mkdir()
        if role == "source":
            Client(Endpoint(url)).send(Message(body=f"warm-{i}", address=f"queue://{dest}",
                                               durable=True) for i in range(4))
        else:
            pq.write_table(pa.table({"n": pa.array(range(4), pa.int64()),
                                     "body": [f"warm-{i}" for i in range(4)]}),
                           data / "part-0.parquet")
        stream = query(spark, role, url, dest, str(data), str(Path(scratch) / "checkpoint"), most)
        stream.trigger(availableNow=True).start().awaitTermination()


def main() -> None:
    role, url, dest, data, checkpoint, mode, most = sys.argv[1:8]
    go = Path(sys.argv[8]) if len(sys.argv) > 8 else None
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import relaymq_spark
    from jvm_options import FAST_START
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(f"relaymq-{role}-driver")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.python.authenticate.socketTimeout", "120s")
             .config("spark.driver.extraJavaOptions", FAST_START)  # jvm_options.py
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    relaymq_spark.register(spark)
    if go is not None:
        warm_up(spark, role, url, most)
        go.with_name(go.name + ".ready").touch()
        while not go.exists():
            time.sleep(0.05)
    stream = query(spark, role, url, dest, data, checkpoint, most)
    if mode == "finish":
        stream = stream.trigger(availableNow=True)
    started = stream.start()
    print("started", flush=True)
    started.awaitTermination()
    print("finished", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
