"""What every authentication element provides: a login that returns a principal."""

from __future__ import annotations

from typing import Protocol

from relaymq.broker.security import ConnectRequest, Principal


class LoginFailed(Exception):
    """A refused login. `reason` is for the audit log only; clients are told the
    same thing whatever it is, so they cannot learn which user names exist."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Authenticator(Protocol):
    """An authentication element (``<simpleAuthenticationPlugin>``, ``<jaas...>``)."""

    #: the configuration element, for messages (``simpleAuthenticationPlugin``)
    tag: str
    @property
    def accepts_certificates(self) -> bool:
        """Logs clients in by their TLS certificate (AMQP then offers SASL EXTERNAL)."""
        ...

    def login(self, request: ConnectRequest) -> Principal:
        """Return the principal or raise `LoginFailed`. May block (a KDF, a
        properties file re-read): the broker calls it in a worker thread."""
        ...
