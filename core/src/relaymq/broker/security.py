"""Who is connecting, and the default security (allow everything)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ConnectRequest:
    username: str | None = None
    password: str | None = None
    client_id: str | None = None
    transport: str = "vm"
    remote_address: str | None = None
    certificates: list[object] = field(default_factory=list)
    #: what a challenge-response SASL exchange (SCRAM) proved, as the object the
    #: authentication plugin that ran it made; None for password logins
    sasl: object | None = None


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection acts as. `system` marks the broker's own connections
    (scheduler, management): authorization plugins let them do anything."""

    name: str
    groups: frozenset[str] = frozenset()
    anonymous: bool = False
    system: bool = False


ANONYMOUS = Principal("anonymous", anonymous=True)
