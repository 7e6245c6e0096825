"""The selector cache: which selectors each consumer queue's consumers have used.

Rules, as in ActiveMQ's SubQueueSelectorCacheBroker:

* a consumer without a selector is remembered as ``TRUE`` (matches everything);
* selectors stay after their consumer leaves — that is the point: messages a
  returning consumer will want keep accumulating while it is away;
* ``singleSelectorPerDestination``: a new selector replaces the queue's
  previous one (``TRUE`` is kept beside it), and when a selector-less consumer
  leaves a queue that also has a real selector, ``TRUE`` is dropped;
* ``ignoreWildcardSelectors``: selectors with a ``LIKE`` wildcard are not cached.

RelayMQ also remembers whether a selector was compiled with STOMP's string
conversion, so a cached selector matches exactly what its consumer matched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relaymq.model.destination import Destination
from relaymq.selector import InvalidSelector, Selector

from relaymq_selector_cache.wildcards import has_like_wildcards

#: How a selector-less consumer is remembered (ActiveMQ's MATCH_EVERYTHING).
MATCH_EVERYTHING = "TRUE"


@dataclass(frozen=True, slots=True)
class CachedSelector:
    """One remembered selector of one consumer queue."""

    text: str
    string_conversion: bool = False

    def compile(self) -> Selector:
        return Selector.compile(self.text, string_conversion=self.string_conversion)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"selector": self.text}
        if self.string_conversion:
            out["stringConversion"] = True
        return out


class SelectorCache:
    """Destination key (``queue://NAME``) -> remembered selectors, in arrival order."""

    def __init__(self, *, single_selector_per_destination: bool = False,
                 ignore_wildcard_selectors: bool = False) -> None:
        self.single = single_selector_per_destination
        self.ignore_wildcards = ignore_wildcard_selectors
        self._entries: dict[str, dict[CachedSelector, None]] = {}  # ordered sets
        self._compiled: dict[str, tuple[Selector, ...]] = {}
        #: bumped on every change; the persister writes when it moved
        self.version = 0

    # -- learning -------------------------------------------------------------------
    def consumer_added(self, queue: Destination, selector: Selector | None) -> bool:
        """Remember `selector` for `queue`; returns True when the cache changed."""
        entry = _entry(selector)
        if entry.text != MATCH_EVERYTHING and self.ignore_wildcards and has_like_wildcards(entry.text):
            return False
        key = queue.key
        known = self._entries.get(key)
        if known is None:
            known = self._entries[key] = {}
        if self.single and entry.text != MATCH_EVERYTHING:
            kept = {e: None for e in known if e.text == MATCH_EVERYTHING}
            if entry in known and len(known) == len(kept) + 1:
                return False
            known.clear()
            known.update(kept)
        elif entry in known:
            return False
        known[entry] = None
        return self._changed(key)

    def consumer_removed(self, queue: Destination, selector: Selector | None) -> bool:
        """Apply the single-selector rule when a selector-less consumer leaves."""
        if not self.single or selector is not None:
            return False
        key = queue.key
        known = self._entries.get(key)
        if not known or len(known) < 2:
            return False
        dropped = [e for e in known if e.text == MATCH_EVERYTHING]
        for e in dropped:
            del known[e]
        return self._changed(key) if dropped else False

    def forget(self, queue: Destination, text: str | None = None) -> bool:
        """Drop one remembered selector (or all of `queue`'s); True when something went."""
        key = queue.key
        known = self._entries.get(key)
        if not known:
            return False
        if text is None:
            del self._entries[key]
        else:
            gone = [e for e in known if e.text == text]
            if not gone:
                return False
            for e in gone:
                del known[e]
            if not known:
                del self._entries[key]
        return self._changed(key)

    def _changed(self, key: str) -> bool:
        self._compiled.pop(key, None)
        self.version += 1
        return True

    # -- asking ---------------------------------------------------------------------
    def selectors_for(self, queue: Destination) -> tuple[Selector, ...]:
        """The compiled selectors remembered for `queue` (the SelectorProvider call)."""
        key = queue.key
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = tuple(
                e.compile() for e in self._entries.get(key, ()))
        return compiled

    def entries(self, queue: Destination | str) -> list[CachedSelector]:
        key = queue if isinstance(queue, str) else queue.key
        return list(self._entries.get(key, ()))

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())

    @property
    def destinations(self) -> list[str]:
        return sorted(k for k, v in self._entries.items() if v)

    # -- (de)serialising ----------------------------------------------------------------
    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        return {key: [e.to_json() for e in self._entries[key]] for key in self.destinations}

    def load(self, destinations: dict[str, list[CachedSelector]]) -> None:
        """Replace the contents (start-up); does not count as a change."""
        self._entries = {k: dict.fromkeys(v) for k, v in destinations.items() if v}
        self._compiled.clear()

    def describe(self) -> list[str]:
        """One line per queue: ``queue://X: 'a = 1', TRUE``."""
        return [f"{key}: " + ", ".join(_show(e) for e in self._entries[key])
                for key in self.destinations]


def _entry(selector: Selector | None) -> CachedSelector:
    if selector is None or not selector.text.strip():
        return CachedSelector(MATCH_EVERYTHING)
    return CachedSelector(selector.text, bool(selector.string_conversion))


def _show(e: CachedSelector) -> str:
    text = e.text if e.text == MATCH_EVERYTHING else repr(e.text)
    return text + (" (string conversion)" if e.string_conversion else "")


def parse_entry(raw: Any) -> CachedSelector:
    """One JSON entry -> `CachedSelector`; raises ValueError when it is not one.

    Accepts ``{"selector": TEXT, "stringConversion": BOOL}`` or a bare string.
    The selector must compile: a cache that cannot be evaluated is useless.
    """
    if isinstance(raw, str):
        raw = {"selector": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("selector"), str):
        raise ValueError(f"expected {{\"selector\": \"...\"}}, found {raw!r}")
    conversion = raw.get("stringConversion", False)
    if not isinstance(conversion, bool):
        raise ValueError(f"stringConversion must be true or false, found {conversion!r}")
    entry = CachedSelector(raw["selector"], conversion)
    try:
        entry.compile()
    except InvalidSelector as exc:
        raise ValueError(f"invalid selector {entry.text!r}: {exc}") from exc
    return entry
