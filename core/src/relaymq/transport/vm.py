"""`vm://NAME`: the in-process transport and the embedded-broker registry.

`vm://localhost` connects to the broker registered under `localhost` in this
process, or starts one on first connect (like ActiveMQ's
`vm://localhost?broker.persistent=false`). A `<transportConnector uri="vm://NAME"/>`
registers a configured broker under NAME. Options on the URI:
`broker.persistent` (default false), `broker.brokerName`, `broker.schedulerSupport`,
`broker.useJmx` (ignored), `create=false` (fail instead of starting a broker).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

from relaymq.spi.transport import ConnectorContext, TransportUri

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker

_brokers: dict[str, Broker] = {}
_lock: asyncio.Lock | None = None


def register(name: str, broker: Broker) -> None:
    _brokers[name] = broker


def unregister(name: str, broker: Broker | None = None) -> None:
    if broker is None or _brokers.get(name) is broker:
        _brokers.pop(name, None)


def lookup(name: str) -> Broker | None:
    b = _brokers.get(name)
    return b if b is not None and b.started else None


async def embedded_broker(uri: str) -> Broker:
    """The broker `uri` names, started on first use unless `create=false`."""
    global _lock
    parsed = TransportUri.parse(uri)
    name = parsed.host if parsed.host != "0.0.0.0" else "localhost"
    existing = lookup(name)
    if existing is not None:
        return existing
    if _lock is None:
        _lock = asyncio.Lock()
    async with _lock:
        existing = lookup(name)
        if existing is not None:
            return existing
        opts = parsed.options
        if opts.get("create", "true").lower() == "false":
            raise ConnectionError(f"no embedded broker named {name!r} and create=false")
        from relaymq.broker.broker import Broker
        from relaymq.config.model import BrokerConfig

        config = BrokerConfig(
            broker_name=opts.get("broker.brokerName", name),
            persistent=opts.get("broker.persistent", "false").lower() == "true",
            scheduler_support=opts.get("broker.schedulerSupport", "false").lower() == "true",
        )
        broker = Broker(config)
        await broker.start()
        register(name, broker)
        return broker


class VmConnector:
    """Registers the configured broker under the connector's vm name."""

    scheme = "vm"

    def __init__(self, context: ConnectorContext) -> None:
        self.context = context
        # the kernel hands connectors its Broker; this registry keeps the full object
        self.broker = cast("Broker", context.broker)
        self.name = context.uri.host if context.uri.host != "0.0.0.0" else context.broker.name

    async def start(self) -> None:
        register(self.name, self.broker)

    async def stop(self) -> None:
        unregister(self.name, self.broker)

    @property
    def address(self) -> str:
        return f"vm://{self.name}"


def VmTransportFactory(context: ConnectorContext) -> VmConnector:  # noqa: N802 - entry point name
    return VmConnector(context)
