"""A Spark driver for crash tests, run as a child process with the venv's python:

    stream_driver.py source URL DEST OUT CHECKPOINT MODE MAX
        RelayMQ queue -> Parquet (MODE "run": until killed; "finish": all available, then exit)
    stream_driver.py sink URL DEST COUNT CHECKPOINT MODE MAX
        rows 0..COUNT-1 (a Parquet file written by the test, as a file stream) -> RelayMQ queue
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    role, url, dest, data, checkpoint, mode, most = sys.argv[1:8]
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
    if role == "source":
        stream = (spark.readStream.format("relaymq").option("url", url)
                  .option("destination", dest).option("maxMessagesPerTrigger", most).load()
                  .select("sequence", "body_string", "message_id")
                  .writeStream.format("parquet").option("path", data)
                  .option("checkpointLocation", checkpoint))
    else:
        schema = "n long, body string"
        stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                  .parquet(data).selectExpr("body", "n")
                  .writeStream.format("relaymq").option("url", url).option("destination", dest)
                  .option("checkpointLocation", checkpoint))
    if mode == "finish":
        stream = stream.trigger(availableNow=True)
    query = stream.start()
    print("started", flush=True)
    query.awaitTermination()
    print("finished", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
