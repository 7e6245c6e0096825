"""``<virtualSelectorCacheBrokerPlugin>``: remember consumer queues' selectors.

With ``selectorAware="true"`` a virtual topic forwards a message to a consumer
queue only when an active consumer's selector matches it. This plugin learns
every selector used on a queue (from the ``relaymq_consumer_added`` hook) and
offers them as the broker's selector provider
(``broker.extensions["selector-cache"]``, see relaymq_virtual_topic.selectors),
so messages a temporarily absent consumer will want keep accumulating and the
rest do not.

Browsers and broker-connection consumers do not widen the cache: a browser
reads what is there, and a network consumer's selector is its remote
consumers' business. Temporary queues and topic subscriptions are not tracked.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from relaymq.errors import ConfigError
from relaymq.hookspecs import hookimpl
from relaymq.model.destination import Destination

from relaymq_selector_cache.cache import SelectorCache
from relaymq_selector_cache.storage import (
    CorruptCache,
    document,
    move_aside,
    read_cache,
    write_atomic,
)

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.dispatch.consumer import Consumer
    from relaymq.selector import Selector

log = logging.getLogger("relaymq.selector_cache")

#: The ``broker.extensions`` key selector-aware virtual topics look up.
SELECTOR_PROVIDER = "selector-cache"
#: Start-up lines listing cache contents; the rest is `relaymq selector-cache show`.
_LOG_LINES = 20


class VirtualSelectorCacheBrokerPlugin:
    """The broker plugin entry point ``virtualSelectorCacheBrokerPlugin``."""

    @dataclass(slots=True)
    class Config:
        """Attributes of ``<virtualSelectorCacheBrokerPlugin>`` (ActiveMQ's names)."""

        #: JSON file the cache survives restarts in; none keeps it in memory only
        persist_file: Path | None = None
        #: ms between writes; 0 writes as soon as the cache changes (ActiveMQ: 600000)
        persist_interval: int = 0
        #: a new selector on a queue replaces the previous one (TRUE is kept)
        single_selector_per_destination: bool = False
        #: do not cache selectors with LIKE wildcards
        ignore_wildcard_selectors: bool = False

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        if self.config.persist_interval < 0:
            raise ConfigError("<virtualSelectorCacheBrokerPlugin persistInterval> must be >= 0")
        self.cache = SelectorCache(
            single_selector_per_destination=self.config.single_selector_per_destination,
            ignore_wildcard_selectors=self.config.ignore_wildcard_selectors,
        )
        #: where a corrupt persist file was moved at start-up, if it was
        self.moved_aside: Path | None = None
        self._written = 0
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    # -- assembly ------------------------------------------------------------------
    def install(self, broker: Broker) -> None:
        """Load the persisted cache, learn from consumer events, offer the selectors."""
        current = broker.extensions.get(SELECTOR_PROVIDER)
        if current is not None and current is not self:
            raise ConfigError("<virtualSelectorCacheBrokerPlugin> is configured twice; one "
                              "selector cache serves every virtual topic")
        self._load()
        broker.plugins.register(self, description="<virtualSelectorCacheBrokerPlugin>")
        broker.extensions[SELECTOR_PROVIDER] = self
        self._log_contents()

    def _load(self) -> None:
        path = self.config.persist_file
        if path is None:
            return
        if path.is_dir():
            # Never "move aside" a directory: persistFile="${activemq.data}" is a typo
            # for a file inside it, not a corrupt cache.
            raise ConfigError(f"<virtualSelectorCacheBrokerPlugin persistFile=\"{path}\"> is a "
                              "directory; name a file, e.g. persistFile=\"${activemq.data}/"
                              "selectorcache.json\"")
        try:
            found = read_cache(path)
        except CorruptCache as exc:
            self._set_aside(path, str(exc))
            return
        if found is None:
            log.info("selector cache: %s does not exist yet; starting empty", path)
            return
        destinations, problems = found
        for problem in problems:
            log.warning("selector cache %s: skipped an entry: %s", path, problem)
        self.cache.load(destinations)
        self._written = self.cache.version

    def _set_aside(self, path: Path, reason: str) -> None:
        try:
            self.moved_aside = move_aside(path)
        except OSError as exc:
            log.warning("selector cache: %s is unusable (%s) and could not be moved aside (%s); "
                        "starting with an empty cache", path, reason, exc.strerror or exc)
            return
        log.warning("selector cache: %s is unusable (%s); moved it to %s and started with an "
                    "empty cache (selectors are re-learnt as consumers subscribe)",
                    path, reason, self.moved_aside)

    def _log_contents(self) -> None:
        where = self.config.persist_file or "memory only (no persistFile)"
        lines = self.cache.describe()
        log.info("selector cache (%s): %d selector(s) for %d queue(s)", where, len(self.cache),
                 len(lines))
        for line in lines[:_LOG_LINES]:
            log.info("selector cache: %s", line)
        if len(lines) > _LOG_LINES:
            log.info("selector cache: ... and %d more queue(s); see `relaymq selector-cache show "
                     "%s`", len(lines) - _LOG_LINES, where)

    # -- the selector provider --------------------------------------------------------
    def selectors_for(self, queue: Destination) -> tuple[Selector, ...]:
        """Remembered selectors of `queue` (asked by selector-aware virtual topics)."""
        return self.cache.selectors_for(queue)

    # -- learning -------------------------------------------------------------------------
    @staticmethod
    def _tracks(consumer: Consumer) -> bool:
        dest = consumer.destination
        return (dest.is_queue and not dest.is_temporary and not dest.is_wildcard
                and not consumer.browser and not consumer.network)

    @hookimpl
    def relaymq_consumer_added(self, consumer: Consumer) -> None:
        if self._tracks(consumer) and self.cache.consumer_added(consumer.destination,
                                                                consumer.selector):
            log.debug("selector cache: %s", "; ".join(self.cache.describe()))
            self._persist_soon()

    @hookimpl
    def relaymq_consumer_removed(self, consumer: Consumer) -> None:
        if self._tracks(consumer) and self.cache.consumer_removed(consumer.destination,
                                                                  consumer.selector):
            self._persist_soon()

    # -- persistence ------------------------------------------------------------------------
    def _persist_soon(self) -> None:
        """Write after `persistInterval` ms; changes meanwhile share the write."""
        if self.config.persist_file is None or self._timer is not None or self._task is not None:
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.config.persist_interval / 1000.0, self._start_write)

    def _start_write(self) -> None:
        self._timer = None
        self._task = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        path = self.config.persist_file
        assert path is not None
        try:
            while self.cache.version != self._written:
                version = self.cache.version
                await asyncio.to_thread(write_atomic, path, document(self.cache.to_json()))
                self._written = version
        except OSError as exc:
            log.error("selector cache: cannot write %s: %s (the broker keeps running; the "
                      "next change or the broker's stop tries again)", path, exc)
        finally:
            self._task = None

    async def flush(self) -> None:
        """Write now if anything changed since the last write."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            await self._task
        if self.config.persist_file is not None and self.cache.version != self._written:
            self._task = asyncio.get_running_loop().create_task(self._write())
            await self._task

    async def stop(self) -> None:
        await self.flush()
