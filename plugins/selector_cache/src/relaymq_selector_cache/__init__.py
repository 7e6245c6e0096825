"""RelayMQ selector cache for selector-aware virtual topics (virtualSelectorCacheBrokerPlugin)"""
