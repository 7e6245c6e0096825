"""RelayMQ's relational-database store: `<jdbcPersistenceAdapter>` (SQLite, PostgreSQL).

See docs/jdbc.md. Modules: `config` (attributes), `datasource` (Spring beans ->
URLs), `schema` (tables), `engines`, `lease` (master/slave locker), `writer`
(group commit thread), `adapter` (the store), `inspect` and `cli`, `testing`
(a PostgreSQL server for tests).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from relaymq_jdbc.config import JDBCConfig, LockerConfig

if TYPE_CHECKING:
    from relaymq_jdbc.adapter import JDBCPersistenceAdapter, JDBCStoreError

_LAZY = {
    "JDBCPersistenceAdapter": "relaymq_jdbc.adapter",
    "JDBCStoreError": "relaymq_jdbc.adapter",
}

__all__ = ["JDBCConfig", "JDBCPersistenceAdapter", "JDBCStoreError", "LockerConfig"]


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: `relaymq <command> --help` and the
    other plugin commands import this package without needing SQLAlchemy."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
