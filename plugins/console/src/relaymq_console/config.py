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
    #: one PEM file with the certificate and its key (issue 23's `tls="..."`); the
    #: same as tlsCertFile without tlsKeyFile
    tls: str | None = None
    #: a non-local bind without relaymq-auth is refused unless this is true
    allow_unauthenticated: bool = False
    #: seconds a login session lasts without use
    session_timeout: int = 1800
    #: seconds failed logins from one address are counted over: the fifth within it
    #: refuses the address's logins until the oldest of them is this old
    login_failure_window: int = 60
    #: ms between an open dashboard's refreshes (RabbitMQ's management UI and
    #: Hawtio refresh every 5 s too); a queue's page refreshes every second
    refresh_interval: int = 5000
    #: false: nobody logs in, everybody may change things (jetty.xml's
    #: `authenticate=false`); like running without relaymq-auth, local only unless
    #: allowUnauthenticated
    authenticate: bool = True
    #: a Jetty realm file (ActiveMQ's jetty-realm.properties, `user: password, role`):
    #: the console's own users, their roles as groups, instead of relaymq-auth's
    users_file: str | None = None
    #: addresses or networks (`10.0.0.5`, `10.0.0.0/24`) of reverse proxies whose
    #: X-Forwarded-For and X-Forwarded-Proto are believed; none by default: the
    #: address a request came from is always its peer's
    trusted_proxies: list[str] = field(default_factory=list)
    #: the domain of Jolokia-style MBean names (`<managementContext jmxDomainName>`)
    jmx_domain_name: str | None = None
    #: set on a console enabled by ActiveMQ's jetty.xml or managementContext: which
    implied_by: str | None = None
    origin: Origin = field(default_factory=Origin)

    def __post_init__(self) -> None:
        if self.tls and not self.tls_cert_file:
            self.tls_cert_file = self.tls

    @property
    def local(self) -> bool:
        return self.host in LOCAL_HOSTS


def open_console(cfg: ConsoleConfig, has_auth: bool) -> bool:
    """Nobody logs in: `authenticate="false"`, or neither a `usersFile` nor relaymq-auth
    (`has_auth`) gives users."""
    return not cfg.authenticate or (not cfg.users_file and not has_auth)
