"""`<jdbcPersistenceAdapter>` and its `<locker>`: ActiveMQ's attributes, typed.

An existing activemq.xml loads unchanged: the data source is a Spring `<bean>`
referred to as `dataSource="#id"` (translated by `datasource.py`), or a plain
SQLAlchemy `url="..."`; with neither, the store is a SQLite file in the broker's
data directory (ActiveMQ's embedded Derby default, done with SQLite).
Intervals are milliseconds, as in ActiveMQ. docs/jdbc.md describes every attribute.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from relaymq.config.model import Origin, PluginElement

#: Attributes accepted for compatibility that change nothing here, and why.
NOT_APPLICABLE: dict[str, str] = {
    "transaction_isolation": "each group commit is one transaction at the database's default "
                             "isolation; the lease keeps a single writer",
    "lock_data_source": "the lease row lives in the store's own database",
    "use_external_message_references": "messages are always stored whole",
}

LOCKERS = ("lease-database-locker", "database-locker", "transaction-database-locker")
#: ActiveMQ's default lockKeepAlivePeriod; left at it, the renewal period simply
#: follows the lease (a third of it) without a warning.
DEFAULT_KEEP_ALIVE = 30000


@dataclass(slots=True)
class LockerConfig:
    """`<lease-database-locker>` (or `<database-locker>`, run as a lease here), or
    `<transaction-database-locker>` (a row lock held in a transaction; PostgreSQL)."""

    #: How often a waiting broker retries the lease (ms); also the lease's length
    #: (lease lockers; the transaction locker has no lease).
    lock_acquire_sleep_interval: int = 10000
    #: Who the lease names; empty: `<brokerName>@<host>:<pid>` (unique per process).
    lease_holder_id: str = ""
    #: Largest tolerated difference between this host's clock and the database's (ms);
    #: 0: always use the database's clock.
    max_allowable_diff_from_db_time: int = field(
        default=0, metadata={"xml": "maxAllowableDiffFromDBTime"})
    #: Fail at start when another broker holds the lease, instead of waiting as a slave.
    fail_if_locked: bool = False
    origin: Origin = field(default_factory=Origin)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class JDBCConfig:
    """The typed form of `<jdbcPersistenceAdapter>`."""

    #: `#bean-id` of a Spring data source bean (translated to `url`).
    data_source: str = ""
    #: RelayMQ: a SQLAlchemy URL (`postgresql+psycopg://user:pw@host/db`, `sqlite:///path`).
    url: str = ""
    #: Where the default SQLite database lives; empty: `<dataDirectory>/jdbc`.
    directory: str = ""
    create_tables_on_startup: bool = True
    table_prefix: str = ""
    #: How often acknowledged rows' space is given back and expired messages are
    #: deleted (ms); 0 disables the periodic cleanup.
    cleanup_period: int = 300000
    #: How often the master renews its lease (ms); must be shorter than the lease
    #: (the locker's lockAcquireSleepInterval).
    lock_keep_alive_period: int = DEFAULT_KEEP_ALIVE
    use_lock: bool = True
    #: ActiveMQ's older name for `useLock`.
    use_database_lock: bool = True
    #: RelayMQ: most operations one group commit carries (more waits for the next).
    max_batch_size: int = 4000
    #: RelayMQ: connections for reads besides the writer's.
    pool_size: int = 4

    # -- accepted, no effect here (see NOT_APPLICABLE) -----------------------
    transaction_isolation: int = 0
    lock_data_source: str = ""
    use_external_message_references: bool = False

    locker: LockerConfig = field(default_factory=LockerConfig)
    locker_kind: str = field(default="lease-database-locker", metadata={"attribute": False})
    bean: PluginElement | None = field(default=None, metadata={"attribute": False})
    origin: Origin = field(default_factory=Origin)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def locking(self) -> bool:
        return self.use_lock and self.use_database_lock

    @property
    def lease_ms(self) -> int:
        """How long a lease lasts: the locker's lockAcquireSleepInterval, as ActiveMQ."""
        return self.locker.lock_acquire_sleep_interval

    @property
    def holds_row_lock(self) -> bool:
        """`transaction-database-locker`: a row lock held in an open transaction."""
        return self.locker_kind == "transaction-database-locker"

    @property
    def keep_alive_ms(self) -> int:
        """The renewal period actually used: lockKeepAlivePeriod when it is shorter
        than the lease, else a third of the lease (a renewal must land in time)."""
        k = self.lock_keep_alive_period
        if self.holds_row_lock:  # no lease: touch the locked row every lockKeepAlivePeriod
            return k or DEFAULT_KEEP_ALIVE
        return k if 0 < k < self.lease_ms else max(1, self.lease_ms // 3)

    def problems(self) -> list[str]:
        out = []
        for name in ("cleanup_period", "lock_keep_alive_period"):
            if getattr(self, name) < 0:
                out.append(f"{_camel(name)}={getattr(self, name)}: must not be negative")
        if self.locker.lock_acquire_sleep_interval <= 0:
            out.append(f"lockAcquireSleepInterval={self.locker.lock_acquire_sleep_interval}: "
                       "must be positive")
        if self.max_batch_size <= 0 or self.pool_size <= 0:
            out.append("maxBatchSize and poolSize must be positive")
        if self.table_prefix and not all(c.isalnum() or c == "_" for c in self.table_prefix):
            out.append(f"tablePrefix=\"{self.table_prefix}\": only letters, digits and _")
        if self.url and self.data_source:
            out.append("give either url or dataSource, not both")
        return out

    def ignored_settings(self) -> list[str]:
        """One line per attribute set to a value that has no effect here."""
        out = []
        fields = {f.name: f for f in dataclasses.fields(self)}
        for name, why in NOT_APPLICABLE.items():
            f = fields.get(name)
            if f is not None and getattr(self, name) != f.default:
                out.append(f"{_camel(name)}={getattr(self, name)!r} has no effect: {why}")
        if (self.locking and not self.holds_row_lock
                and 0 < self.lease_ms <= self.lock_keep_alive_period
                and self.lock_keep_alive_period != DEFAULT_KEEP_ALIVE):
            out.append(f"lockKeepAlivePeriod={self.lock_keep_alive_period} is not shorter than the "
                       f"lease (lockAcquireSleepInterval={self.lease_ms}); the lease is renewed "
                       f"every {self.keep_alive_ms} ms instead")
        if self.locker_kind == "database-locker":
            out.append("<database-locker> is run as a lease-database-locker (a lease row renewed "
                       "every lockKeepAlivePeriod, not a held row lock)")
        for attr in self.extra:
            out.append(f"{attr} is not a jdbcPersistenceAdapter attribute RelayMQ knows; ignored")
        for attr in self.locker.extra:
            out.append(f"{attr} is not a {self.locker_kind} attribute RelayMQ knows; ignored")
        return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)
