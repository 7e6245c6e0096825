"""RelayMQ selector cache for selector-aware virtual topics (virtualSelectorCacheBrokerPlugin).

Configured as in ActiveMQ Classic, under ``<plugins>``; see docs/selector-cache.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    """The names above, imported on first use: `relaymq <command> --help` and the
    other plugin commands import this package without needing the selector parser."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
