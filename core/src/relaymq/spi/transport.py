"""The transport contract: connectors that accept clients for a URI scheme.

A transport plugin registers a factory under each scheme it serves in the entry
point group `relaymq.transports` (``amqp``, ``amqps``, ``stomp``, ``stomp+ssl``, ...).
The broker calls ``factory(context)`` for each ``<transportConnector>`` whose URI
has that scheme and then ``await connector.start()``.

Protocol code should be sans-IO (bytes in, events out, an injected ``send``);
the connector owns the asyncio server and sockets.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol
from urllib.parse import parse_qsl, urlsplit

from relaymq.broker.tls import server_ssl_context

if TYPE_CHECKING:
    from relaymq.spi.broker import BrokerHandle


@dataclass(slots=True)
class TransportUri:
    """A parsed connector URI: ``amqp://0.0.0.0:5672?maximumConnections=1000``."""

    scheme: str
    host: str
    port: int | None
    options: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    @classmethod
    def parse(cls, uri: str) -> TransportUri:
        parts = urlsplit(uri)
        host = parts.hostname or "0.0.0.0"
        return cls(
            scheme=parts.scheme,
            host=host,
            port=parts.port,
            options=dict(parse_qsl(parts.query, keep_blank_values=True)),
            raw=uri,
        )


@dataclass(slots=True)
class ConnectorContext:
    """Everything a connector needs, passed as one object."""

    broker: BrokerHandle
    uri: TransportUri
    name: str
    #: options the connector consumed; the broker warns about the rest.
    used_options: set[str] = field(default_factory=set)

    def option(self, name: str, default: str | None = None) -> str | None:
        if name in self.uri.options:
            self.used_options.add(name)
            return self.uri.options[name]
        return default

    def ssl_context(self) -> ssl.SSLContext | None:
        """A server TLS context from the URI options or the broker's ``sslContext``
        (``keyStore``/``certFile``, ``keyFile``, ``trustStore``/``caFile``,
        ``needClientAuth``), or None for a plain connector."""
        return server_ssl_context(self.uri.scheme, self.uri.raw, self.option)


class TransportConnector(Protocol):
    """A listening connector."""

    async def start(self) -> None:
        """Start listening; after this ``address`` is known."""

    async def stop(self) -> None:
        """Stop listening and close every connection it accepted."""

    @property
    def address(self) -> str:
        """``host:port`` it listens on (the real port when 0 was configured)."""


class TransportFactory(Protocol):
    def __call__(self, context: ConnectorContext) -> TransportConnector: ...
