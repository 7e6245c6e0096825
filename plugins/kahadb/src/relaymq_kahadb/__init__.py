"""relaymq-kahadb: ActiveMQ's `kahaDB` persistence adapter for RelayMQ.

A journal of append-only data files with group commit, an in-memory index
checkpointed to disk, disk reclaim with compaction, and recovery that never
silently drops data. See docs/kahadb.md.
"""

from relaymq_kahadb.adapter import KahaDBPersistenceAdapter
from relaymq_kahadb.config import KahaDBConfig

__all__ = ["KahaDBConfig", "KahaDBPersistenceAdapter"]
