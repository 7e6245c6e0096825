"""JVM options for every Spark JVM the tests start (the session, the stream drivers,
the standalone cluster's daemons, executors and spark-submit, the `relaymq spark`
command): JIT with C1 only.

The tests run short jobs, so most of a JVM's life is its start, and on a small
machine the C2 compiler threads compete with it for the cores: C1 alone halves a
SparkSession's start on 2 busy cores (about 26 s -> 11 s here) and the small jobs
run no slower. What the tests check does not change: the same Spark, the same
queries, only the JIT level of its JVMs."""

from __future__ import annotations

import os

#: `spark.driver.extraJavaOptions`, `spark.executor.extraJavaOptions`, SPARK_DAEMON_JAVA_OPTS
FAST_START = "-XX:TieredStopAtLevel=1"


def submit_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with PYSPARK_SUBMIT_ARGS giving FAST_START to the
    driver JVM of a child that builds its own SparkSession (pyspark's launcher reads it)."""
    return dict(os.environ if env is None else env,
                PYSPARK_SUBMIT_ARGS=f"--driver-java-options={FAST_START} pyspark-shell")
