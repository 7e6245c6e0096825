"""relaymq-spark throughput on local[2]: the streaming source into Parquet, the
sink into a persistent queue, the kahaDB journal reader, each against the same
job reading the same data from Parquet (the physical reference).

    .venv/bin/python bench/scripts/spark_bench.py --count 100000

Starts its own broker (`relaymq run`, kahaDB, private port) and Spark session;
prints one line per measurement (messages/s, wall time, and the CPU seconds the
broker and Spark -- its JVM and the Python processes it starts -- spent on it:
on a shared machine the wall time mostly measures the other load, the CPU time
what the job costs). Before measuring, each
path runs once untimed on `--warmup` messages of another queue: the first job
of a session pays for starting Python workers and loading pyarrow (seconds on
a loaded machine), which is not throughput."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "spark" / "tests"))

from brokers import BrokerProcess  # noqa: E402
from proton import Message  # noqa: E402
from relaymq_spark.client import Client, Endpoint  # noqa: E402


def _cpu_by_pid() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of it and its reaped children) from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]) / tick)
    return out


def cpu(broker_pid: int) -> tuple[float, float]:
    """(broker CPU s, CPU s of this process's other descendants: Spark's JVM and
    the Python processes it starts, ended ones counted in their parent)."""
    procs = _cpu_by_pid()
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (parent, _) in procs.items():
            if parent in mine and pid not in mine and pid != broker_pid:
                mine.add(pid)
                grew = True
    spark = sum(procs[p][1] for p in mine if p in procs and p != os.getpid())
    return procs.get(broker_pid, (0, 0.0))[1], spark


BROKER_PID = 0


def timed(label: str, count: int, fn) -> float:  # type: ignore[no-untyped-def]
    b0, s0 = cpu(BROKER_PID)
    start = time.perf_counter()
    fn()
    took = time.perf_counter() - start
    b1, s1 = cpu(BROKER_PID)
    print(f"{label:<44} {count / took:>10,.0f} msg/s  ({took:.1f} s for {count:,}; CPU s: "
          f"broker {b1 - b0:.1f}, Spark {s1 - s0:.1f}; load {os.getloadavg()[0]:.1f})", flush=True)
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--stream-runs", type=int, default=1,
                    help="run the stream path this many times in the session: the first "
                         "pays for the JVM compiling its code paths (seconds of CPU), "
                         "the later ones show the rate of a warm, long-running stream")
    ap.add_argument("--paths", default="stream,sink,journal",
                    help="which paths to measure (comma-separated): stream, sink, journal; "
                         "e.g. --paths journal --count 1000000 for the journal at scale")
    args = ap.parse_args()
    paths = {p.strip() for p in args.paths.split(",") if p.strip()}
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    broker = BrokerProcess(work).start()
    global BROKER_PID
    BROKER_PID = broker.proc.pid if broker.proc is not None else 0
    try:
        import relaymq_spark
        from pyspark.sql import SparkSession
        from relaymq_spark.sender import send_encoded

        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.python.authenticate.socketTimeout", "120s").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        relaymq_spark.register(spark)
        body = "x" * args.size
        n = args.count
        ep = Endpoint(broker.url)
        encoded = bytes(Message(body=body, address="queue://BENCH", durable=True).encode())

        def fill() -> None:
            left = n
            while left:  # one connection per 50 000 (a Spark task's share, roughly)
                k = min(left, 50_000)
                send_encoded(ep, iter([encoded] * k))
                left -= k

        timed("fill (relaymq-amqp client, persistent)", n, fill)
        out = work / "stream-out"
        records = n  # message records the journal will hold

        progress: list[dict] = []  # type: ignore[type-arg]

        def stream(queue: str = "BENCH", to: Path = out, chk: str = "chk") -> None:
            q = (spark.readStream.format("relaymq").option("url", broker.url)
                 .option("destination", queue).option("releaseOnCommit", "false").load()
                 .writeStream.format("parquet").option("path", str(to))
                 .option("checkpointLocation", str(work / chk)).trigger(availableNow=True)
                 .start())
            q.awaitTermination()
            progress[:] = q.recentProgress

        if args.warmup and paths & {"stream", "sink"}:
            client = Client(ep)
            client.send(Message(body=body, address="queue://WARM") for _ in range(args.warmup))
            stream("WARM", work / "warm-out", "warm-chk")
            spark.read.parquet(str(work / "warm-out")).select("body_string").withColumnRenamed(
                "body_string", "body").write.format("relaymq").option("url", broker.url) \
                .option("destination", "WARM-SUNK").mode("append").save()
            records += 2 * args.warmup
        def micro_batches() -> None:
            rows_in = sum(p["numInputRows"] for p in progress)
            busy = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
            read = sum(p["durationMs"].get("addBatch", 0) for p in progress) / 1000
            if not busy:
                return
            print(f"{'  in its micro-batches (Spark triggerExecution)':<44} "
                  f"{rows_in / busy:>10,.0f} msg/s  ({busy:.1f} s, of which addBatch "
                  f"{read:.1f} s; the rest is query start and stop)", flush=True)
            parts: dict[str, float] = {}
            for p in progress:
                for k, v in p["durationMs"].items():
                    if k not in ("triggerExecution", "addBatch"):
                        parts[k] = parts.get(k, 0) + v / 1000
            print(f"  {len(progress)} micro-batches; the rest of their time: "
                  + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(parts.items())), flush=True)

        if "stream" in paths:
            timed("stream source -> Parquet (relaymq)", n, stream)
            micro_batches()
            for i in range(1, args.stream_runs):
                # the same messages again, a new query and checkpoint: the session's
                # JVM has compiled the path by now, as in a long-running stream
                timed(f"  again, run {i + 1} of the session", n,
                      lambda i=i: stream("BENCH", work / f"stream-out-{i}", f"chk-{i}"))
                micro_batches()
            timed("same job from Parquet (reference)", n, lambda: spark.read.parquet(str(out))
                  .write.mode("overwrite").parquet(str(work / "ref-out")))
        elif "sink" in paths:  # the rows to sink, untimed
            spark.read.format("relaymq").option("url", broker.url).option(
                "destination", "BENCH").load().write.parquet(str(out))
        if "sink" in paths:
            rows = spark.read.parquet(str(out)).select("body_string").withColumnRenamed(
                "body_string", "body").cache()
            rows.count()
            print(f"  (the rows: {rows.rdd.getNumPartitions()} partitions, one sending task each)",
                  flush=True)
            timed("sink -> persistent queue (relaymq)", n, lambda: rows.write.format("relaymq")
                  .option("url", broker.url).option("destination", "SUNK").mode("append")
                  .save())
            timed("same rows -> Parquet (reference)", n, lambda: rows.write.mode("overwrite")
                  .parquet(str(work / "sink-ref")))
            records += n
        broker.stop()
        if "journal" in paths:
            copy = work / "kahadb-copy"
            shutil.copytree(broker.data, copy)
            shutil.rmtree(broker.data, ignore_errors=True)

            def journal(fmt: str = "noop", to: Path | None = None,
                        schema: str | None = None) -> None:
                r = spark.read.format("relaymq-journal")
                if schema:
                    r = r.schema(schema)
                w = r.load(str(copy)).write.format(fmt).mode("overwrite")
                w.save(str(to)) if to is not None else w.save()

            if not out.exists():  # the Parquet reference: the same messages, untimed
                journal("parquet", out)
            timed("journal reader, whole directory (relaymq)", records, journal)
            timed("Parquet of the same messages (reference)", n, lambda: spark.read.parquet(
                str(out)).write.format("noop").mode("overwrite").save())
            few = "destination string, sequence long, body binary"
            timed("journal reader, 3 columns by .schema", records,
                  lambda: journal(schema=few))
            timed("Parquet, the same 3 columns (reference)", n, lambda: spark.read.parquet(
                str(out)).select("destination", "sequence", "body").write.format("noop")
                .mode("overwrite").save())
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
