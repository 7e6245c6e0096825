"""The kahaDB store's exceptions (kept apart: compiled modules raise but do not
define them, since mypyc cannot build subclasses of OSError or RuntimeError).

Errors that stop a start-up for a reason the operator must fix are also
`RelayMQError`s, so `relaymq run` reports them as one clear line, not a traceback."""

from relaymq.errors import StartupError
from relaymq.errors import StoreLockedError as KernelStoreLocked


class StoreClosed(RuntimeError):
    """The store is not started (or already stopped)."""


class JournalError(OSError):
    """The journal could not write or sync; the store stops accepting work."""


class MissingJournalFiles(StartupError, RuntimeError):
    """Live messages point into data files that are gone."""


class StoreLockedError(KernelStoreLocked, RuntimeError):
    """Another broker (or another store in this process) uses the directory."""
