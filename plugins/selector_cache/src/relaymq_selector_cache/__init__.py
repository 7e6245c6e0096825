"""RelayMQ selector cache for selector-aware virtual topics (virtualSelectorCacheBrokerPlugin).

Configured as in ActiveMQ Classic, under ``<plugins>``; see docs/selector-cache.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relaymq.lazy_names import lazy_names

if TYPE_CHECKING:
    from relaymq_selector_cache.cache import MATCH_EVERYTHING, CachedSelector, SelectorCache
    from relaymq_selector_cache.plugin import SELECTOR_PROVIDER, VirtualSelectorCacheBrokerPlugin

_LAZY = {
    "CachedSelector": "relaymq_selector_cache.cache",
    "MATCH_EVERYTHING": "relaymq_selector_cache.cache",
    "SELECTOR_PROVIDER": "relaymq_selector_cache.plugin",
    "SelectorCache": "relaymq_selector_cache.cache",
    "VirtualSelectorCacheBrokerPlugin": "relaymq_selector_cache.plugin",
}

__all__ = [
    "MATCH_EVERYTHING",
    "SELECTOR_PROVIDER",
    "CachedSelector",
    "SelectorCache",
    "VirtualSelectorCacheBrokerPlugin",
]


__getattr__ = lazy_names(__name__, _LAZY)
