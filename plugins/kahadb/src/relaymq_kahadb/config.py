"""`<kahaDB .../>` attributes: ActiveMQ's names, typed, with what each one does here.

Every attribute ActiveMQ documents for KahaDB is accepted, so an existing
`activemq.xml` loads unchanged. Attributes are in three groups:

* applied: they change what this store does (sizes, intervals, sync policy, GC,
  corruption handling, preallocation, locking);
* read by the broker: `concurrentStoreAndDispatch*` describe broker behaviour;
  the adapter exposes them for the kernel;
* no meaning here (the index is not a paged B-tree, there is no OpenWire):
  accepted, and a non-default value is logged once at start-up with the reason
  (`ignored_settings`), so nobody tunes a knob that does nothing.

Sizes accept `32mb`, `1 gb`, `1048576` (binary units, as ActiveMQ); intervals are
milliseconds, as in ActiveMQ.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from relaymq.config.model import Origin

#: Field metadata understood by the kernel's typed conversion: the value is a size.
_BYTES = {"unit": "bytes"}

SYNC_STRATEGIES = ("always", "periodic", "never")
PREALLOCATION_STRATEGIES = ("sparse_file", "os_kernel_copy", "zeros", "chunked_zeros", "none")
PREALLOCATION_SCOPES = ("entire_journal", "entire_journal_async", "none")

#: Largest data file: locations keep 32-bit offsets (4 bytes per message in the index).
MAX_FILE_LENGTH = (1 << 32) - (1 << 20)

#: Attributes with no effect in this implementation, and why (logged when set).
NOT_APPLICABLE: dict[str, str] = {
    "index_cache_size": "the index is a columnar in-memory table, not a paged B-tree with a page cache",
    "index_write_batch_size": "index changes are applied in memory and written whole at each checkpoint",
    "enable_index_write_async": "checkpoints are always written by a background thread",
    "enable_index_recovery_file": "checkpoints are written to a new file and renamed, never in place",
    "enable_index_page_caching": "the index is not paged",
    "use_index_lfru_eviction": "the index is not paged",
    "index_lfu_eviction_factor": "the index is not paged",
    "max_async_jobs": "there is no async job queue; stores complete through the group commit",
    "store_open_wire_version": "messages are stored in RelayMQ's own codec, not OpenWire",
    "failover_producers_audit_depth": "duplicate detection of failover producers is the broker's",
    "max_failover_producers_to_track": "duplicate detection of failover producers is the broker's",
    "purge_recovered_xa_transaction_strategy": "XA transactions are not supported",
}


@dataclass(slots=True)
class KahaDBConfig:
    """The typed form of `<kahaDB>`; see docs/kahadb.md for every attribute."""

    # -- where ---------------------------------------------------------------
    #: Data directory; empty: `<broker dataDirectory>/kahadb`.
    directory: str = ""
    #: Where the index checkpoint lives; empty: `directory`.
    index_directory: str = ""
    #: Move reclaimed data files to `directoryArchive` instead of deleting them.
    archive_data_logs: bool = False
    directory_archive: str = ""

    # -- journal -------------------------------------------------------------
    journal_max_file_length: int = field(default=32 << 20, metadata=_BYTES)
    #: Most bytes one group-commit write takes (more queued work waits for the next).
    journal_max_write_batch_size: int = field(default=4 << 20, metadata=_BYTES)
    journal_disk_sync_strategy: str = "always"
    journal_disk_sync_interval: int = 1000
    #: Deprecated ActiveMQ switch: false means journalDiskSyncStrategy="never".
    enable_journal_disk_syncs: bool = True
    preallocation_strategy: str = "sparse_file"
    preallocation_scope: str = "entire_journal"
    checksum_journal_files: bool = True
    check_for_corrupt_journal_files: bool = False
    ignore_missing_journalfiles: bool = False

    # -- index ---------------------------------------------------------------
    checkpoint_interval: int = 5000
    force_recover_index: bool = False
    archive_corrupted_index: bool = False
    enable_index_disk_syncs: bool = True

    # -- disk reclaim --------------------------------------------------------
    cleanup_interval: int = 30000
    cleanup_on_stop: bool = True
    enable_ack_compaction: bool = True
    compact_acks_after_no_gc: int = field(default=10, metadata={"xml": "compactAcksAfterNoGC"})
    compact_acks_ignores_store_growth: bool = False
    #: RelayMQ: rewrite a stuck file forward when less than this fraction of it is live.
    compaction_threshold: float = 0.5
    #: RelayMQ: most bytes of live records one cleanup cycle rewrites forward.
    max_compaction_bytes_per_cycle: int = field(default=64 << 20, metadata=_BYTES)

    # -- locking -------------------------------------------------------------
    #: RelayMQ: fail at once when another broker holds the lock (false: wait for it).
    fail_if_locked: bool = True
    #: How often a waiting broker retries the lock (ms), as ActiveMQ's shared-file-locker.
    lock_acquire_sleep_interval: int = 10000

    # -- read by the broker --------------------------------------------------
    concurrent_store_and_dispatch_queues: bool = True
    concurrent_store_and_dispatch_topics: bool = False

    # -- accepted, no effect here (see NOT_APPLICABLE) -----------------------
    index_cache_size: int = 10000
    index_write_batch_size: int = 1000
    enable_index_write_async: bool = False
    enable_index_recovery_file: bool = True
    enable_index_page_caching: bool = True
    use_index_lfru_eviction: bool = field(default=False, metadata={"xml": "useIndexLFRUEviction"})
    index_lfu_eviction_factor: float = field(default=0.2, metadata={"xml": "indexLFUEvictionFactor"})
    max_async_jobs: int = 10000
    store_open_wire_version: int = 11
    #: ms between checks that the lock file is still this broker's (0: every 5 s;
    #: negative: never); a broker that lost it stops serving
    lock_keep_alive_period: int = 0
    failover_producers_audit_depth: int = 1000
    max_failover_producers_to_track: int = 1000
    purge_recovered_xa_transaction_strategy: str = field(
        default="NEVER", metadata={"xml": "purgeRecoveredXATransactionStrategy"})

    origin: Origin = field(default_factory=Origin)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.journal_disk_sync_strategy = self.journal_disk_sync_strategy.strip().lower()
        self.preallocation_strategy = self.preallocation_strategy.strip().lower()
        self.preallocation_scope = self.preallocation_scope.strip().lower()
        if not self.enable_journal_disk_syncs:
            self.journal_disk_sync_strategy = "never"
        problems = []
        if self.journal_disk_sync_strategy not in SYNC_STRATEGIES:
            problems.append(f"journalDiskSyncStrategy=\"{self.journal_disk_sync_strategy}\": "
                            f"expected one of {', '.join(SYNC_STRATEGIES)}")
        if self.preallocation_strategy not in PREALLOCATION_STRATEGIES:
            problems.append(f"preallocationStrategy=\"{self.preallocation_strategy}\": "
                            f"expected one of {', '.join(PREALLOCATION_STRATEGIES)}")
        if self.preallocation_scope not in PREALLOCATION_SCOPES:
            problems.append(f"preallocationScope=\"{self.preallocation_scope}\": "
                            f"expected one of {', '.join(PREALLOCATION_SCOPES)}")
        if not 4096 <= self.journal_max_file_length <= MAX_FILE_LENGTH:
            problems.append(f"journalMaxFileLength={self.journal_max_file_length}: expected "
                            f"between 4 kb and {MAX_FILE_LENGTH >> 20} mb")
        if not 0.0 <= self.compaction_threshold <= 1.0:
            problems.append(f"compactionThreshold={self.compaction_threshold}: expected 0..1")
        for name in ("journal_disk_sync_interval", "checkpoint_interval", "cleanup_interval",
                     "lock_acquire_sleep_interval", "compact_acks_after_no_gc"):
            if getattr(self, name) < 0:
                problems.append(f"{_xml_name(name)}={getattr(self, name)}: must not be negative")
        for name in ("journal_max_write_batch_size", "max_compaction_bytes_per_cycle"):
            if getattr(self, name) <= 0:
                problems.append(f"{_xml_name(name)}={getattr(self, name)}: must be positive")
        if problems:
            from relaymq.errors import ConfigError

            where = f" at {self.origin}" if self.origin.line else ""
            raise ConfigError("\n".join(f"<kahaDB>{where}: {p}" for p in problems),
                              [f"<kahaDB>{where}: {p}" for p in problems])

    @property
    def preallocates(self) -> bool:
        """Whether new data files get their full length up front."""
        return self.preallocation_scope != "none" and self.preallocation_strategy != "none"

    def ignored_settings(self) -> list[str]:
        """One line per attribute set to a non-default value that has no effect here."""
        out = []
        fields = {f.name: f for f in dataclasses.fields(self)}
        for name, why in NOT_APPLICABLE.items():
            f = fields.get(name)
            if f is not None and getattr(self, name) != f.default:
                xml = _xml_name(name)
                out.append(f"{xml}={getattr(self, name)!r} has no effect: {why}")
        return out  # attributes it does not know at all: the conversion warns of them


def _xml_name(name: str) -> str:
    """The attribute's name in activemq.xml."""
    for f in dataclasses.fields(KahaDBConfig):
        if f.name == name and f.metadata.get("xml"):
            return str(f.metadata["xml"])
    return _camel(name)


def size_text(n: int) -> str:
    """`32mb`, `64kb` or `1000` bytes: how a size reads in activemq.xml."""
    for unit, shift in (("gb", 30), ("mb", 20), ("kb", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)
