"""relaymq-jdbc passes the kernel's store conformance suite on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from relaymq.testing.store_conformance import StoreConformance, StoreFactory
from relaymq_jdbc import JDBCConfig, JDBCPersistenceAdapter

_prefixes = itertools.count(1)


class TestSQLiteConformance(StoreConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        url = f"sqlite:///{tmp_path / 'store.sqlite'}"
        return lambda: JDBCPersistenceAdapter(JDBCConfig(url=url, cleanup_period=0))


class TestPostgresConformance(StoreConformance):
    @pytest.fixture
    def store_factory(self, postgres_url: str) -> StoreFactory:
        return lambda: JDBCPersistenceAdapter(JDBCConfig(url=postgres_url, cleanup_period=0))
