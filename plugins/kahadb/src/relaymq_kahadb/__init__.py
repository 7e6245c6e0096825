"""relaymq-kahadb: ActiveMQ's `kahaDB` persistence adapter for RelayMQ.

A journal of append-only data files with group commit, an in-memory index
checkpointed to disk, disk reclaim with compaction, and recovery that never
silently drops data. See docs/kahadb.md.
"""

from relaymq import compiled as _compiled

_compiled.select(__name__, __path__[0])

from relaymq_kahadb.adapter import KahaDBPersistenceAdapter  # noqa: E402 (after select)
from relaymq_kahadb.config import KahaDBConfig  # noqa: E402

__all__ = ["KahaDBConfig", "KahaDBPersistenceAdapter"]
