"""Collects what a config load found: errors, warnings and informational notes.

A load keeps going after the first problem so that one run of
`relaymq config check` lists every error. `strict` turns each warning into an
error, which is how `--strict` is implemented everywhere (loader, typed
conversion, plugin registry) without each of them knowing about the flag.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from relaymq.config.model import Origin
from relaymq.errors import ConfigError

log = logging.getLogger("relaymq.config")

#: the warnings `relaymq run` logged from its start-up check (`checks.check`):
#: building the broker converts the same elements again, and a store logs its
#: ignored settings when it starts; neither logs one of these a second time
_reported: set[str] = set()


_collecting = 0


@contextmanager
def collecting() -> Iterator[None]:
    """While a whole configuration is checked (`checks.check`), reports collect and
    log nothing: the check returns every warning and its caller reports them."""
    global _collecting
    _collecting += 1
    try:
        yield
    finally:
        _collecting -= 1


def mark_reported(messages: Iterable[str]) -> None:
    """`messages` were logged by the start-up check (replaces what was marked)."""
    _reported.clear()
    _reported.update(messages)


def warn_once(logger: logging.Logger, message: str) -> None:
    """Log a configuration warning unless the start-up check already logged it."""
    if message not in _reported:
        logger.warning("%s", message)


def at(origin: Origin | None) -> str:
    """`' at activemq.xml:14'`, or nothing when the origin is unknown."""
    if origin is None or (origin.file in ("<memory>", "") and not origin.line):
        return ""
    return f" at {origin}"


@dataclass(slots=True)
class Report:
    strict: bool = False
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: keep warnings and notes only, for a caller that reports them itself
    #: (`relaymq config check` prints them, `relaymq run` logs them once)
    quiet: bool = False

    def error(self, message: str) -> None:
        self.errors.append(message)

    def warn(self, message: str) -> None:
        """A problem RelayMQ can safely step around; an error under `strict`."""
        if self.strict:
            self.errors.append(message + " (an error because of --strict)")
        else:
            self.warnings.append(message)
            if not self.quiet and not _collecting:
                warn_once(log, message)

    def note(self, message: str) -> None:
        """Accepted and deliberately ignored (e.g. `useJmx`): never an error."""
        self.notes.append(message)
        if not self.quiet and not _collecting:
            log.info("%s", message)

    def absorb(self, exc: ConfigError) -> None:
        self.errors.extend(exc.errors or [str(exc)])

    def raise_if_errors(self) -> None:
        if self.errors:
            count = len(self.errors)
            head = "1 configuration error" if count == 1 else f"{count} configuration errors"
            raise ConfigError(
                head + ":\n" + "\n".join(f"  - {e}" for e in self.errors), list(self.errors)
            )
