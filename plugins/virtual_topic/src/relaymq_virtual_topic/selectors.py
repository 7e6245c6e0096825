"""The contract between selector-aware virtual topics and a selector cache.

With ``selectorAware="true"`` a consumer queue receives a message only when one
of its consumers' selectors matches it. Consumers that are away do not count,
so a consumer that reconnects would miss what was published meanwhile. A
*selector provider* remembers selectors per consumer queue; the virtual topic
asks it when no active consumer matched (as ActiveMQ's
SelectorAwareVirtualTopicInterceptor asks VirtualDestinationSelectorCacheBrokerPlugin).

The provider is found in ``broker.extensions[SELECTOR_PROVIDER]`` at send time,
so neither plugin imports the other and their config order does not matter.
`relaymq-selector-cache` registers one; any object with this method works.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from relaymq.model.destination import Destination

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.selector import Selector

#: The key a selector provider is registered under in ``broker.extensions``.
SELECTOR_PROVIDER = "selector-cache"


@runtime_checkable
class SelectorProvider(Protocol):
    """Remembered selectors of a queue's consumers, present or not."""

    def selectors_for(self, queue: Destination) -> Collection[Selector]:
        """The compiled selectors known for `queue` (a match-everything consumer
        is a selector that matches everything); empty when none are known.
        Called per message and consumer queue: it must be cheap (no I/O)."""
        ...


def selector_provider(broker: Broker) -> SelectorProvider | None:
    """The broker's selector provider, if a plugin registered one."""
    extensions = getattr(broker, "extensions", None)
    if not extensions:
        return None
    provider = extensions.get(SELECTOR_PROVIDER)
    # hasattr, not isinstance(Protocol): this runs per message and must stay cheap
    return provider if hasattr(provider, "selectors_for") else None
