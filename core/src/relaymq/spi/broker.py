"""The broker as plugins receive it: in hooks (`broker=`), in `install(broker)` and
in a connector's `ConnectorContext.broker`.

`BrokerHandle` names what the kernel promises a plugin: the broker's name and
configuration, its plugin registry, the management API (docs/management.md), the
change feed (docs/change-feed.md), outgoing connections, the extensions plugins
offer each other, send filters and client connections. `relaymq.broker.broker.Broker`
is the implementation; the contracts in `spi/` and `hookspecs` name this protocol
so they stay below the broker that implements them. A plugin that needs more of
the broker may annotate with `Broker` itself (plugins sit above the kernel).
"""

from __future__ import annotations

from typing import Any, Protocol

import pluggy

from relaymq.broker.chain import SendFilter
from relaymq.broker.connection import ClientConnection
from relaymq.broker.security import ConnectRequest
from relaymq.config.model import BrokerConfig
from relaymq.feed.feed import ChangeFeed
from relaymq.management import Management
from relaymq.outgoing.registry import OutgoingConnections


class PluginHost(Protocol):
    """The broker's plugin registry (`relaymq.plugins.PluginRegistry`)."""

    @property
    def pm(self) -> pluggy.PluginManager: ...

    def register(self, obj: Any, name: str | None = None, *,
                 description: str | None = None) -> str: ...


class BrokerHandle(Protocol):
    """The broker's public face (see the module docstring)."""

    @property
    def name(self) -> str: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def plugins(self) -> PluginHost: ...
    @property
    def management(self) -> Management: ...
    @property
    def change_feed(self) -> ChangeFeed: ...
    @property
    def outgoing(self) -> OutgoingConnections: ...
    @property
    def extensions(self) -> dict[str, object]: ...

    def add_filter(self, f: SendFilter) -> None: ...

    async def connect(self, request: ConnectRequest | None = None, *, network: bool = False,
                      origin: str | None = None) -> ClientConnection: ...
