"""Fixtures: one local[2] SparkSession per test run, RelayMQ brokers as child
processes (kahaDB, AMQP on a private port)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from brokers import BrokerProcess  # noqa: E402
from jvm_options import FAST_START  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local[2] SparkSession shared by every Spark test of the run."""
    from relaymq.testing.requirements import require_all

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        if require_all():
            raise
        pytest.skip("pyspark is not installed (pip install relaymq-spark)")
    # executors' Python workers must be this interpreter (the venv with relaymq_spark)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("relaymq-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.python.authenticate.socketTimeout", "120s")
               .config("spark.driver.extraJavaOptions", FAST_START)  # jvm_options.py
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    import relaymq_spark

    relaymq_spark.register(session)
    yield session
    session.stop()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path).start()
    yield b
    b.stop()
