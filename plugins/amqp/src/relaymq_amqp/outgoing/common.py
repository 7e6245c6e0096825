"""Errors, outcomes and URIs of outgoing AMQP connections."""

from __future__ import annotations

from dataclasses import dataclass

from relaymq.spi import outgoing as spi
from relaymq.spi.outgoing import Endpoint, parse_endpoints

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Condition


class AmqpConnectionError(spi.OutgoingError):
    """The connection could not be made, or the peer refused it."""

    def __init__(self, message: str, condition: Condition | None = None) -> None:
        super().__init__(message, str(condition) if condition is not None else None)
        self.amqp_condition = condition


class ConnectionLost(AmqpConnectionError, spi.ConnectionLost):
    """The connection dropped before the peer settled a send."""


class LinkRefused(AmqpConnectionError, spi.LinkRefused):
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

#: schemes an outgoing AMQP connection accepts (tcp/ssl: Artemis' broker-connection URIs)
PLAIN_SCHEMES = ("tcp", "amqp")
TLS_SCHEMES = ("ssl", "amqps", "amqp+ssl")
SCHEMES = PLAIN_SCHEMES + TLS_SCHEMES


def check_scheme(ep: Endpoint, uri: str) -> None:
    if ep.scheme not in SCHEMES:
        raise ValueError(f"{ep} in {uri!r}: an AMQP connection takes tcp://, amqp://, amqps:// "
                         "or ssl://")


def is_tls(ep: Endpoint, options: dict[str, str] | None = None) -> bool:
    opts = {**(options or {}), **ep.options}
    return ep.scheme in TLS_SCHEMES or opts.get("sslEnabled", "").lower() == "true"


def port_of(ep: Endpoint) -> int:
    return ep.port or (5671 if is_tls(ep) else 5672)


def parse_uri(uri: str) -> tuple[list[Endpoint], dict[str, str]]:
    """Endpoints of ``tcp://h1:5672?opts#tcp://h2:5672`` (Artemis' failover form)
    or ``failover:(amqp://h1,amqp://h2)``. Schemes: tcp/amqp (plain),
    ssl/amqps/amqp+ssl (TLS, also ``sslEnabled=true``)."""
    endpoints, options = parse_endpoints(uri)
    for ep in endpoints:
        check_scheme(ep, uri)
        options = {**options, **ep.options}
    return endpoints, options
