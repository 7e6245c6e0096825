"""The garbage collection Spark's Python workers run between tasks, made cheap.

A reused Python worker (`spark.python.worker.reuse`, the default) runs a full
`gc.collect()` after every task (pyspark's daemon). With pyspark, pyarrow and
pandas loaded that walks 80 000-100 000 container objects that live as long as
the process -- modules, classes, functions -- and found none of them garbage:
30-250 ms of CPU per task on this project's machines, more than the read of a
10 000-message partition. `settle()` runs once per worker process, at the start
of its first read or write: it makes the imports a read makes lazily (pyarrow's
first conversion imports pandas), collects once and moves everything alive then
into the interpreter's permanent generation (`gc.freeze()`, Python's own remedy
for long-lived objects in forked worker processes). Later collections walk only
what was made after it; nothing is kept alive by it (reference counting frees
frozen objects as before), only reference cycles among those objects are left
to the process's end.

`RELAYMQ_SPARK_GC_FREEZE=0` in the workers' environment (e.g.
`spark.executorEnv.RELAYMQ_SPARK_GC_FREEZE`) turns it off.
"""

from __future__ import annotations

import gc
import os

_settled = False


def settle() -> None:
    """Freeze the worker's long-lived objects once per process (see the module)."""
    global _settled
    if _settled:
        return
    _settled = True
    if os.environ.get("RELAYMQ_SPARK_GC_FREEZE", "1") == "0":
        return
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401 - imported by the column builders on first use

    pa.array([b""], pa.binary())  # pyarrow's first conversion imports pandas when installed
    gc.collect()
    gc.freeze()
