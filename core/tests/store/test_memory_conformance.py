"""The kernel's memory store passes the store conformance suite."""

from __future__ import annotations

import pytest
from relaymq.store.memory import MemoryPersistenceAdapter
from relaymq.testing.store_conformance import StoreConformance, StoreFactory


class TestMemoryStoreConformance(StoreConformance):
    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        return MemoryPersistenceAdapter
