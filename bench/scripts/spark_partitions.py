"""What a Spark partition of a live read costs: the same batch read (and
stream) of one destination with different `messagesPerPartition`, on one
broker and one `local[2]` session, alternating, each job's Spark CPU split
into the Python workers' (`pyspark.daemon pyspark.worker`) and the rest (the JVM,
the planning workers).

    .venv/bin/python bench/scripts/spark_partitions.py --count 200000 --rounds 2 \\
        --jobs batch:10000,batch:50000,batch:100000,stream:10000,stream:50000

A job is `batch` (`spark.read.format("relaymq")` -> `noop`), `stream`
(`readStream`, `availableNow`, -> `noop`) or `stream-parquet` (-> Parquet),
with its `messagesPerPartition` after the colon.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "spark" / "tests"))

import spark_bench as sb  # noqa: E402
from brokers import BrokerProcess  # noqa: E402
from proton import Message  # noqa: E402


def workers_cpu() -> float:
    """CPU seconds of the running Python worker daemon and its workers (with their
    reaped children); a worker that ended unreaped is missing, so this is a
    lower bound when Spark replaced workers during a job."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if b"pyspark.daemon\x00pyspark.worker" not in Path(f"/proc/{name}/cmdline").read_bytes():
                continue
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(v) for v in fields[11:15]) / tick
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", default="batch:10000,batch:50000")
    args = ap.parse_args()
    jobs = [(j.split(":")[0], int(j.split(":")[1])) for j in args.jobs.split(",")]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="spark-partitions-"))
    broker = BrokerProcess(work).start()
    sb.BROKER_PID = broker.proc.pid if broker.proc is not None else 0
    try:
        import relaymq_spark
        from pyspark.sql import SparkSession
        from relaymq_spark.client import Endpoint
        from relaymq_spark.sender import send_encoded

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        relaymq_spark.register(spark)
        for queue, n in (("WARM", 5000), ("B", args.count)):
            data = bytes(Message(body="x" * 1024, address=f"queue://{queue}",
                                 durable=True).encode())
            while n:
                k = min(n, 50_000)
                send_encoded(Endpoint(broker.url), iter([data] * k))
                n -= k
        url = broker.url
        runs = itertools.count()

        def source(stream: bool, queue: str, per: int):  # type: ignore[no-untyped-def]
            r = (spark.readStream if stream else spark.read).format("relaymq") \
                .option("url", url).option("destination", queue) \
                .option("messagesPerPartition", str(per))
            return r.option("releaseOnCommit", "false").load() if stream else r.load()

        def run(kind: str, per: int) -> None:
            if kind == "batch":
                source(False, "B", per).write.format("noop").mode("overwrite").save()
                return
            n = next(runs)
            w = (source(True, "B", per).writeStream
                 .option("checkpointLocation", str(work / f"c{n}")).trigger(availableNow=True))
            w = w.format("noop") if kind == "stream" else \
                w.format("parquet").option("path", str(work / f"p{n}"))
            w.start().awaitTermination()

        source(False, "WARM", 1000).write.format("noop").mode("overwrite").save()
        for _ in range(args.rounds):
            for kind, per in jobs:
                w0 = workers_cpu()
                sb.timed(f"{kind} messagesPerPartition={per}", args.count,
                         lambda kind=kind, per=per: run(kind, per))
                print(f"    of which the Python workers: {workers_cpu() - w0:.1f} s", flush=True)
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
