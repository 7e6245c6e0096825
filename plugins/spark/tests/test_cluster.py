"""The archive job by `spark-submit` on a standalone Spark cluster started on
loopback from pyspark's own launcher (a master and two workers): executors in
the workers' processes read the queue from the broker over the network."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import relaymq_spark
from brokers import free_port
from driver_runs import fill
from jvm_options import FAST_START
from relaymq.testing.waits import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1500)]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - the child writes it until it ends
    try:
        return subprocess.Popen([str(_spark_home() / "bin" / "spark-class"), *args], stdout=out,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    finally:
        out.close()


def test_archive_by_spark_submit_on_a_standalone_cluster(spark, broker, tmp_path: Path) -> None:
    count = 4000
    fill(broker.url, "CLUSTER", count)
    env = dict(os.environ, SPARK_HOME=str(_spark_home()), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_LOG_DIR=str(tmp_path / "logs"), SPARK_WORKER_DIR=str(tmp_path / "work"),
               SPARK_DAEMON_JAVA_OPTS=FAST_START)  # the master's and workers' JVMs
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs = [_start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                     str(port), "--webui-port", str(free_port())], tmp_path / "master.log", env)]
    try:
        for i in range(2):
            procs.append(_start(["org.apache.spark.deploy.worker.Worker", master_url, "--host",
                                 "127.0.0.1", "--cores", "1", "--memory", "700m",
                                 "--webui-port", str(free_port())], tmp_path / f"worker{i}.log",
                                env))
        wait_until(lambda: (tmp_path / "master.log").read_text().count("Registering worker") >= 2,
                   "two workers registered with the master", timeout=240, interval=0.5)
        main = str(Path(relaymq_spark.__file__).with_name("__main__.py"))
        out = tmp_path / "archive"
        done = subprocess.run(
            [str(_spark_home() / "bin" / "spark-submit"), "--master", master_url,
             "--conf", "spark.python.authenticate.socketTimeout=120s",
             "--conf", "spark.executor.memory=512m", "--driver-java-options", FAST_START,
             "--conf", f"spark.executor.extraJavaOptions={FAST_START}", main, "archive",
             "--url", broker.url, "--destination", "CLUSTER", "--out", str(out), "--max-per-trigger", "1000"],
            env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        assert f"archived {count} messages" in done.stdout
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(30)
    seqs = sorted(r.sequence for r in spark.read.parquet(str(out)).collect())
    assert seqs == list(range(1, count + 1))
    # executors ran in the workers: the standalone workers' logs show the executors
    assert list((tmp_path / "work").glob("app-*/*/stderr"))
