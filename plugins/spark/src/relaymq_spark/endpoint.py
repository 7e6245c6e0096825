"""Where and how to reach a broker, and the errors the Spark connector raises.

Kept free of python-qpid-proton (and of pyspark): the sink, the journal and
JDBC readers need only these, and every Python process Spark starts for them
(planning, tasks, commit) imports what they import; `client.py` (proton)
re-exports the names for the readers that talk to the broker through it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit


class RelayMQError(RuntimeError):
    """The broker refused a request or could not be reached; the message says which.
    `retryable`: the connection failed or was lost (not a refusal): trying again
    later may work."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Endpoint:
    """Where and how to connect: `url` (amqp:// or amqps://), credentials, TLS."""

    url: str
    user: str | None = None
    password: str | None = None
    ssl_ca: str | None = None
    ssl_verify: bool = True
    timeout: float = 60.0
    #: seconds to keep retrying reads while the broker cannot be reached (restarts)
    retry: float = 60.0
    extra: dict[str, str] = field(default_factory=dict)

    def host_url(self) -> str:
        parts = urlsplit(self.url)
        if parts.scheme not in ("amqp", "amqps"):
            raise RelayMQError(f"url {self.url!r}: the scheme must be amqp:// or amqps://")
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (5671 if parts.scheme == "amqps" else 5672)
        return f"{parts.scheme}://{host}:{port}"

    def credentials(self) -> tuple[str | None, str | None]:
        parts = urlsplit(self.url)
        user = self.user or (unquote(parts.username) if parts.username else None)
        password = self.password or (unquote(parts.password) if parts.password else None)
        return user, password


def address_of(destination: str) -> str:
    """`queue://X`, `durable://C:N`, or a bare queue name, as a link address."""
    return destination if "://" in destination else f"queue://{destination}"


def ssl_context(ep: Endpoint) -> ssl.SSLContext | None:
    """The TLS context of an ``amqps://`` endpoint (None for ``amqp://``), for
    relaymq-amqp's outgoing connection (the sink's sender, live reads)."""
    if not ep.host_url().startswith("amqps"):
        return None
    ctx = ssl.create_default_context(cafile=ep.ssl_ca)
    if not ep.ssl_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
