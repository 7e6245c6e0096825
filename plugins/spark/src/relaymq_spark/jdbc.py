"""`format("relaymq-jdbc")`: placeholder until the JDBC reader lands."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource


class JdbcDataSource(DataSource):  # type: ignore[misc]
    @classmethod
    def name(cls) -> str:
        return "relaymq-jdbc"
