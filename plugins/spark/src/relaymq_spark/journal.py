"""`format("relaymq-journal")`: placeholder until the offline kahaDB reader lands."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource


class JournalDataSource(DataSource):  # type: ignore[misc]
    @classmethod
    def name(cls) -> str:
        return "relaymq-journal"
