"""`<console>`: where the console listens and who may use it."""

from __future__ import annotations

from dataclasses import dataclass, field

from relaymq.config.model import Origin

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass(slots=True)
class ConsoleConfig:
    host: str = "127.0.0.1"
    port: int = 8161
    #: relaymq-auth groups: admins may change things, viewers only look
    admin_group: str = "admins"
    viewer_group: str = "users"
    #: PEM certificate and key: serve HTTPS
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    #: a non-local bind without relaymq-auth is refused unless this is true
    allow_unauthenticated: bool = False
    #: seconds a login session lasts without use
    session_timeout: int = 1800
    origin: Origin = field(default_factory=Origin)

    @property
    def local(self) -> bool:
        return self.host in LOCAL_HOSTS
