"""Errors, outcomes and URIs of outgoing AMQP connections."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Condition


class AmqpConnectionError(ConnectionError):
    """The connection could not be made, or the peer refused it."""

    def __init__(self, message: str, condition: Condition | None = None) -> None:
        super().__init__(message)
        self.condition = condition


class ConnectionLost(AmqpConnectionError):
    """The connection dropped before the peer settled a send."""


class LinkRefused(AmqpConnectionError):
    """The peer refused or closed a link."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The peer's verdict on a send: accepted, rejected, released or modified."""

    state: str
    condition: Condition | None = None
    failed: bool = False
    undeliverable: bool = False

    @property
    def accepted(self) -> bool:
        return self.state == "accepted"


_STATES = {pn.ACCEPTED: "accepted", pn.REJECTED: "rejected", pn.RELEASED: "released",
           pn.MODIFIED: "modified", 0: "settled"}


@dataclass(slots=True)
class Endpoint:
    host: str
    port: int
    tls: bool
    user: str | None = None
    password: str | None = None

    def __str__(self) -> str:
        return f"{'amqps' if self.tls else 'amqp'}://{self.host}:{self.port}"


def parse_uri(uri: str) -> tuple[list[Endpoint], dict[str, str]]:
    """Endpoints of ``tcp://h1:5672?opts#tcp://h2:5672`` (Artemis' failover form).
    Schemes: tcp/amqp (plain), ssl/amqps/amqp+ssl (TLS, also ``sslEnabled=true``)."""
    endpoints = []
    options: dict[str, str] = {}
    for part in uri.split("#"):
        part = part.strip()
        if not part:
            continue
        u = urlsplit(part)
        opts = dict(parse_qsl(u.query))
        options.update(opts)
        tls = u.scheme in ("ssl", "amqps", "amqp+ssl") or opts.get("sslEnabled", "").lower() == "true"
        if u.scheme not in ("tcp", "amqp", "ssl", "amqps", "amqp+ssl"):
            raise ValueError(f"{part!r}: use tcp://, amqp://, amqps:// or ssl://")
        endpoints.append(Endpoint(u.hostname or "localhost", u.port or (5671 if tls else 5672), tls,
                                  unquote(u.username) if u.username else None,
                                  unquote(u.password) if u.password else None))
    if not endpoints:
        raise ValueError(f"no host in {uri!r}")
    return endpoints, options
