"""relaymq-kahadb: ActiveMQ's `kahaDB` persistence adapter for RelayMQ.

A journal of append-only data files with group commit, an in-memory index
checkpointed to disk, disk reclaim with compaction, and recovery that never
silently drops data. See docs/kahadb.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relaymq import compiled as _compiled
from relaymq.lazy_names import lazy_names

_compiled.select(__name__, __path__[0])

from relaymq_kahadb.config import KahaDBConfig  # noqa: E402

if TYPE_CHECKING:
    from relaymq_kahadb.adapter import KahaDBPersistenceAdapter

_LAZY = {
    "KahaDBPersistenceAdapter": "relaymq_kahadb.adapter",
}

__all__ = ["KahaDBConfig", "KahaDBPersistenceAdapter"]


__getattr__ = lazy_names(__name__, _LAZY)
