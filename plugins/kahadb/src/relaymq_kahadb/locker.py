"""`<kahaDB><locker><shared-file-locker .../></locker></kahaDB>`: ActiveMQ's syntax
for a shared-storage master/slave pair.

ActiveMQ's `shared-file-locker` (its `AbstractLocker` attributes) waits for the
directory's lock unless `failIfLocked="true"`; a `<kahaDB>` that names it is
therefore a broker meant to wait as a slave. The locker's attributes are folded
into `KahaDBConfig` (`fail_if_locked`, `lock_acquire_sleep_interval`), so the
store has one place that says how it locks. Other lockers (ActiveMQ's database
lockers) belong to the JDBC store and are refused here with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from relaymq.config.model import Origin, PluginElement
from relaymq.errors import ConfigError

from relaymq_kahadb.config import KahaDBConfig

LOCKERS = ("shared-file-locker",)


@dataclass(slots=True)
class SharedFileLockerConfig:
    """`<shared-file-locker>`: ActiveMQ's attributes (AbstractLocker + SharedFileLocker)."""

    #: ms between attempts while another broker holds the lock.
    lock_acquire_sleep_interval: int = 10000
    #: Fail at start when the directory is locked, instead of waiting as a slave.
    fail_if_locked: bool = False
    origin: Origin = field(default_factory=Origin)
    extra: dict[str, Any] = field(default_factory=dict)


def apply_locker(config: KahaDBConfig, element: PluginElement, *, strict: bool = False,
                 report: Any = None) -> SharedFileLockerConfig | None:
    """Fold `<locker>` (if any) into `config`; returns the locker's typed form.

    :raises ConfigError: `<locker>` holds anything but one `<shared-file-locker>`,
        or its attributes have bad values.
    """
    from relaymq.config.typed import convert

    locker_el = element.child("locker")
    if locker_el is None:
        return None
    where = f" at {locker_el.origin}" if locker_el.origin.line else ""
    kinds = list(locker_el.children)
    if len(kinds) != 1 or kinds[0].tag not in LOCKERS:
        names = ", ".join(f"<{c.tag}>" for c in kinds) or "nothing"
        raise ConfigError(
            f"<kahaDB><locker>{where} holds {names}; kahaDB takes <shared-file-locker> "
            f"(database lockers belong to <jdbcPersistenceAdapter>)")
    locker = convert(SharedFileLockerConfig, kinds[0], strict=strict, report=report)
    if locker.lock_acquire_sleep_interval <= 0:
        raise ConfigError(f"<shared-file-locker>{where}: lockAcquireSleepInterval="
                          f"{locker.lock_acquire_sleep_interval}: must be positive")
    config.lock_acquire_sleep_interval = locker.lock_acquire_sleep_interval
    # the locker's own failIfLocked (ActiveMQ default false: wait as a slave)
    config.fail_if_locked = locker.fail_if_locked
    return locker

