"""Destination policies (`destinationPolicy/policyMap`) resolved per destination."""

from __future__ import annotations

from relaymq.config.model import DeadLetterStrategyConfig, PolicyEntryConfig
from relaymq.model.destination import Destination, name_matches

DEFAULT_QUEUE_PREFETCH = 1000
DEFAULT_TOPIC_PREFETCH = 32766
DEFAULT_DURABLE_TOPIC_PREFETCH = 100
DEFAULT_BROWSER_PREFETCH = 500


def _specificity(pattern: str) -> tuple[int, int]:
    segs = pattern.split(".")
    return (sum(1 for s in segs if s not in ("*", ">", "#")), len(segs))


class PolicyMap:
    """Chooses the policy entry for a destination: the most specific match wins
    (an exact name over wildcards, more literal segments over fewer), then
    `defaultEntry`, then built-in defaults."""

    def __init__(
        self, entries: list[PolicyEntryConfig] | None = None,
        default: PolicyEntryConfig | None = None,
    ) -> None:
        self.replace(entries, default)

    def replace(self, entries: list[PolicyEntryConfig] | None = None,
                default: PolicyEntryConfig | None = None) -> None:
        """Take new entries (a configuration reload); lookups made after this see them."""
        self._queue: list[tuple[str, PolicyEntryConfig]] = []
        self._topic: list[tuple[str, PolicyEntryConfig]] = []
        #: the `tempQueue="true"` entry (the last one), for every temporary queue
        self._temp_queue: PolicyEntryConfig | None = None
        for e in entries or []:
            if e.temp_queue and not e.queue:
                self._temp_queue = e
            if e.queue:
                self._queue.append((e.queue, e))
            if e.topic:
                self._topic.append((e.topic, e))
        self._queue.sort(key=lambda pe: _specificity(pe[0]), reverse=True)
        self._topic.sort(key=lambda pe: _specificity(pe[0]), reverse=True)
        self.default = default or PolicyEntryConfig()
        self._cache: dict[Destination, PolicyEntryConfig] = {}

    def entry_for(self, destination: Destination) -> PolicyEntryConfig:
        cached = self._cache.get(destination)
        if cached is not None:
            return cached
        if self._temp_queue is not None and destination.is_queue and destination.is_temporary:
            self._cache[destination] = self._temp_queue
            return self._temp_queue
        candidates = self._queue if destination.is_queue else self._topic
        chosen = next(
            (e for pattern, e in candidates if name_matches(pattern, destination.name)),
            self.default,
        )
        self._cache[destination] = chosen
        return chosen

    def prefetch_for(self, destination: Destination, durable: bool = False, browser: bool = False) -> int:
        e = self.entry_for(destination)
        if browser:
            return e.queue_browser_prefetch or DEFAULT_BROWSER_PREFETCH
        if destination.is_queue:
            return e.queue_prefetch if e.queue_prefetch is not None else DEFAULT_QUEUE_PREFETCH
        if durable:
            if e.durable_topic_prefetch is not None:
                return e.durable_topic_prefetch
            return DEFAULT_DURABLE_TOPIC_PREFETCH
        return e.topic_prefetch if e.topic_prefetch is not None else DEFAULT_TOPIC_PREFETCH

    def dead_letter_strategy(self, destination: Destination) -> DeadLetterStrategyConfig:
        return self.entry_for(destination).dead_letter_strategy or _SHARED


_SHARED = DeadLetterStrategyConfig()
