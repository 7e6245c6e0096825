"""RelayMQ's relational-database store: `<jdbcPersistenceAdapter>` (SQLite, PostgreSQL).

See docs/jdbc.md. Modules: `config` (attributes), `datasource` (Spring beans ->
URLs), `schema` (tables), `engines`, `lease` (master/slave locker), `writer`
(group commit thread), `adapter` (the store), `inspect` and `cli`, `testing`
(a PostgreSQL server for tests).
"""

from relaymq_jdbc.adapter import JDBCPersistenceAdapter, JDBCStoreError
from relaymq_jdbc.config import JDBCConfig, LockerConfig

__all__ = ["JDBCConfig", "JDBCPersistenceAdapter", "JDBCStoreError", "LockerConfig"]
