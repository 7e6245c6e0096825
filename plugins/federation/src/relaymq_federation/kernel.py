"""Federation's kernel connections, and whose rights they carry.

A federation acts for someone: the consumers that serve a peer's receivers
act for the user the peer authenticated as on its AMQP connection (its rights
decide what it may read, and whether a missing topic may be created for it);
what a peer's receivers of this broker's own configuration bring in is routed
with the broker's own rights, as Artemis' broker connections are (the broker
configured them). Neither logs in again: a broker that refuses anonymous
clients serves federation all the same.
"""

from __future__ import annotations

from typing import Any

from relaymq.broker.connection import ClientConnection
from relaymq.broker.security import Principal

#: the broker itself, for what its own configuration (``<amqp-connection>``) does
FEDERATION = Principal("federation", system=True)


def network_connection(broker: Any, principal: Principal, label: str,
                       origin: str | None, transport: str = "amqp-federation") -> ClientConnection:
    """A kernel connection of a broker connection (`network`, messages carry
    `origin`), listed among the broker's connections, acting as `principal`."""
    conn = ClientConnection(broker, principal, None, transport, label, True, origin)
    broker.connections.add(conn)
    broker.events.connection_opened(conn)
    return conn


def principal_of(link: Any) -> Principal:
    """Who a link the peer attached acts as: its AMQP connection's user (the
    broker itself on a connection this broker opened)."""
    kconn = getattr(link, "kconn", None)
    principal = getattr(kconn, "principal", None)
    return principal if isinstance(principal, Principal) else FEDERATION
