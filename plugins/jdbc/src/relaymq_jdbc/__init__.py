"""RelayMQ's relational-database store: `<jdbcPersistenceAdapter>` (SQLite, PostgreSQL).

See docs/jdbc.md. Modules: `config` (attributes), `datasource` (Spring beans ->
URLs), `schema` (tables), `engines`, `lease` (master/slave locker), `writer`
(group commit thread), `adapter` (the store), `inspect` and `cli`, `testing`
(a PostgreSQL server for tests).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relaymq.lazy_names import lazy_names

from relaymq_jdbc.config import JDBCConfig, LockerConfig

if TYPE_CHECKING:
    from relaymq_jdbc.adapter import JDBCPersistenceAdapter, JDBCStoreError

_LAZY = {
    "JDBCPersistenceAdapter": "relaymq_jdbc.adapter",
    "JDBCStoreError": "relaymq_jdbc.adapter",
}

__all__ = ["JDBCConfig", "JDBCPersistenceAdapter", "JDBCStoreError", "LockerConfig"]


__getattr__ = lazy_names(__name__, _LAZY)
