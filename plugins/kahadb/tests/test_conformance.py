"""relaymq-kahadb passes the kernel's store conformance suite, under each sync strategy."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaymq.testing.store_conformance import StoreConformance, StoreFactory
from relaymq_kahadb import KahaDBConfig, KahaDBPersistenceAdapter


class TestKahaDBConformance(StoreConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        # Small files so the suite also crosses data file boundaries.
        return lambda: KahaDBPersistenceAdapter(
            KahaDBConfig(directory=str(tmp_path / "kahadb"), journal_max_file_length=256 << 10))


class TestKahaDBPeriodicConformance(StoreConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> StoreFactory:
        return lambda: KahaDBPersistenceAdapter(
            KahaDBConfig(directory=str(tmp_path / "kahadb"), journal_disk_sync_strategy="periodic",
                         journal_disk_sync_interval=50, preallocation_strategy="zeros",
                         preallocation_scope="entire_journal_async",
                         journal_max_file_length=256 << 10))
