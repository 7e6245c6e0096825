"""The kahaDB store's exceptions (kept apart: compiled modules raise but do not
define them, since mypyc cannot build subclasses of OSError or RuntimeError)."""


class StoreClosed(RuntimeError):
    """The store is not started (or already stopped)."""


class JournalError(OSError):
    """The journal could not write or sync; the store stops accepting work."""


class MissingJournalFiles(RuntimeError):
    """Live messages point into data files that are gone."""
