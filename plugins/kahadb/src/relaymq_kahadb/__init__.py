"""relaymq-kahadb: ActiveMQ's `kahaDB` persistence adapter for RelayMQ.

A journal of append-only data files with group commit, an in-memory index
checkpointed to disk, disk reclaim with compaction, and recovery that never
silently drops data. See docs/kahadb.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from relaymq import compiled as _compiled

_compiled.select(__name__, __path__[0])

from relaymq_kahadb.config import KahaDBConfig  # noqa: E402

if TYPE_CHECKING:
    from relaymq_kahadb.adapter import KahaDBPersistenceAdapter

_LAZY = {
    "KahaDBPersistenceAdapter": "relaymq_kahadb.adapter",
}

__all__ = ["KahaDBConfig", "KahaDBPersistenceAdapter"]


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: `relaymq <command> --help` and the
    other plugin commands import this package without needing the store."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
