"""What configured plugin elements construct and how the broker drives them.

Every entry point in `relaymq.persistence`, `relaymq.transports`,
`relaymq.broker_plugins`, `relaymq.destination_interceptors`,
`relaymq.broker_connections` and `relaymq.connection_operations` is a class (or
factory). The registry builds it from its config element:

* if the class has a ``from_element(element, broker)`` classmethod, that is called
  (for elements with nested structure, e.g. ``virtualDestinationInterceptor``);
* otherwise, if it has a ``Config`` dataclass, the element's attributes are
  converted into it (camelCase -> snake_case, typed, file:line errors) and the
  class is called as ``cls(config)``;
* otherwise ``cls()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from relaymq.spi.broker import BrokerHandle


@runtime_checkable
class BrokerPlugin(Protocol):
    """A child of ``<plugins>`` or ``<destinationInterceptors>``.

    ``install`` runs once while the broker is assembled, before any connector
    listens: add send filters (``broker.add_filter``), register hook
    implementations (``broker.plugins.register``), or set policies.
    """

    def install(self, broker: BrokerHandle) -> None: ...


@runtime_checkable
class Service(Protocol):
    """Anything with an async lifecycle the broker starts and stops with itself."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...
