"""RelayMQ as a Spark source and sink (docs/spark.md).

    import relaymq_spark; relaymq_spark.register(spark)

registers the data sources ``relaymq`` (streaming and batch source, sink),
``relaymq-journal`` (offline kahaDB) and ``relaymq-jdbc`` (JDBC store tables).
pyspark is imported only by `register` and the modules that need it.
"""

from __future__ import annotations

from typing import Any

from relaymq import compiled as _compiled

_compiled.select(__name__, __path__[0])

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register every RelayMQ data source with `spark` (a SparkSession)."""
    from relaymq_spark.jdbc import JdbcDataSource
    from relaymq_spark.journal import JournalDataSource
    from relaymq_spark.source import RelayMQDataSource

    for source in (RelayMQDataSource, JournalDataSource, JdbcDataSource):
        spark.dataSource.register(source)
