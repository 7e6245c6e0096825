"""`worker_gc.settle()`: the objects a Spark Python worker holds for its lifetime
leave the collector's walk once, so pyspark's `gc.collect()` after each task
stops scanning them. Run in a child interpreter, as a worker is one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import gc, json
import pyspark.worker  # what a Spark Python worker has loaded before its first task
from relaymq_spark.worker_gc import settle
before = len(gc.get_objects())
settle()
first = gc.get_freeze_count()
walked = len(gc.get_objects())
settle()
print(json.dumps({"before": before, "frozen": first, "walked": walked,
                  "again": gc.get_freeze_count(), "pandas": "pandas" in __import__("sys").modules}))
"""


def _probe(**env: str) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env},
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_settle_freezes_the_workers_long_lived_objects_once() -> None:
    r = _probe()
    assert r["frozen"] >= r["before"] > 10_000  # everything loaded by then is frozen
    assert r["walked"] < r["before"] // 10      # what a collection still walks
    assert r["again"] == r["frozen"]            # the second task freezes nothing more


def test_settle_makes_the_lazy_imports_before_freezing() -> None:
    import importlib.util

    r = _probe()
    # pyarrow's first conversion imports pandas when it is installed: frozen with the rest
    assert r["pandas"] == (importlib.util.find_spec("pandas") is not None)


def test_settle_can_be_turned_off() -> None:
    r = _probe(RELAYMQ_SPARK_GC_FREEZE="0")
    assert r["frozen"] == 0 and r["again"] == 0
    assert r["walked"] >= r["before"]
