"""RelayMQ selector cache for selector-aware virtual topics (virtualSelectorCacheBrokerPlugin).

Configured as in ActiveMQ Classic, under ``<plugins>``; see docs/selector-cache.md.
"""

from relaymq_selector_cache.cache import MATCH_EVERYTHING, CachedSelector, SelectorCache
from relaymq_selector_cache.plugin import SELECTOR_PROVIDER, VirtualSelectorCacheBrokerPlugin

__all__ = [
    "MATCH_EVERYTHING",
    "SELECTOR_PROVIDER",
    "CachedSelector",
    "SelectorCache",
    "VirtualSelectorCacheBrokerPlugin",
]
