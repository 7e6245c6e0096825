"""``<simpleAuthenticationPlugin>``: users, passwords and groups in the configuration.

```xml
<simpleAuthenticationPlugin anonymousAccessAllowed="false">
  <users>
    <authenticationUser username="app" password="ENC(...)" groups="apps,users"/>
    <authenticationUser username="ops" password="$scrypt$ln=14,r=8,p=1$..." groups="admins"/>
  </users>
</simpleAuthenticationPlugin>
```
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from relaymq.broker.security import ConnectRequest, Principal
from relaymq.config.model import Origin, PluginElement
from relaymq.config.report import Report, at, warn_once
from relaymq.config.typed import convert
from relaymq.errors import ConfigError

from relaymq_auth.authn import LoginFailed
from relaymq_auth.passwords import PasswordFormatError, is_plain_text, parse
from relaymq_auth.service import SecurityService
from relaymq_auth.users import User, UserTable

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker

log = logging.getLogger("relaymq.auth")
_CHILD = {"attribute": False}


@dataclass(slots=True)
class AuthenticationUser:
    """``<authenticationUser>``: one user."""

    username: str
    password: str
    groups: str = ""
    origin: Origin = field(default_factory=Origin)


@dataclass(slots=True)
class SimpleConfig:
    #: clients that give no user name and no password log in as `anonymous_user`
    anonymous_access_allowed: bool = False
    anonymous_user: str = "anonymous"
    anonymous_group: str = "anonymous"
    origin: Origin = field(default_factory=Origin)
    users: list[AuthenticationUser] = field(default_factory=list, metadata=_CHILD)


def parse_simple(element: PluginElement, *, strict: bool = False) -> tuple[SimpleConfig, list[str]]:
    """The typed config and its warnings; raises ConfigError listing every problem."""
    report = Report(strict=strict, quiet=True)  # returned: the caller reports them
    config = convert(SimpleConfig, element, report=report, ignore=("users",))
    errors: list[str] = list(report.errors)
    for child in element.children:
        if child.tag != "users":
            continue
        for entry in child.children:
            if entry.tag != "authenticationUser":
                report.warn(f"<{entry.tag}>{at(entry.origin)} inside <users> is ignored: "
                            "expected <authenticationUser>")
                continue
            try:
                config.users.append(convert(AuthenticationUser, entry, report=report))
            except ConfigError as exc:
                errors.extend(exc.errors or [str(exc)])
    seen: set[str] = set()
    for user in config.users:
        if user.username in seen:
            errors.append(f"<authenticationUser username=\"{user.username}\">{at(user.origin)}: "
                          "the user is listed twice")
        seen.add(user.username)
        try:
            parse(user.password)
        except PasswordFormatError as exc:
            errors.append(f"<authenticationUser username=\"{user.username}\">"
                          f"{at(user.origin)}: {exc}")
    errors.extend(e for e in report.errors if e not in errors)
    if errors:
        raise ConfigError("\n".join(errors), errors)
    plain = [u.username for u in config.users if is_plain_text(u.password)]
    if plain:
        report.warnings.append(
            f"<simpleAuthenticationPlugin>{at(element.origin)}: plain-text passwords for "
            f"{', '.join(plain)}; store hashes from `relaymq passwd` or ENC(...) values instead")
    return config, report.warnings


class SimpleAuthenticationPlugin:
    tag = "simpleAuthenticationPlugin"
    accepts_certificates = False

    def __init__(self, config: SimpleConfig) -> None:
        self.config = config
        self.table = UserTable({
            u.username: User(u.username, parse(u.password),
                             frozenset(g.strip() for g in u.groups.split(",") if g.strip()))
            for u in config.users
        })

    @classmethod
    def from_element(cls, element: PluginElement, broker: Broker) -> SimpleAuthenticationPlugin:
        config, warnings = parse_simple(element, strict=bool(getattr(broker, "strict", False)))
        for warning in warnings:
            warn_once(log, warning)
        return cls(config)

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        return parse_simple(element, strict=strict)[1]

    def install(self, broker: Broker) -> None:
        SecurityService.of(broker).set_authenticator(self, self.config.origin)

    def reload(self, element: PluginElement, service: SecurityService) -> None:
        """New users, passwords and groups from a re-read configuration (SIGHUP)."""
        config, warnings = parse_simple(element)
        for warning in warnings:
            warn_once(log, warning)
        fresh = SimpleAuthenticationPlugin(config)
        self.config, self.table = fresh.config, fresh.table

    def lookup(self, username: str) -> User | None:
        """The configured user (SCRAM derives its keys from the password)."""
        return self.table.users.get(username)

    def login(self, request: ConnectRequest) -> Principal:
        cfg = self.config
        if request.username is None and request.password is None:
            if cfg.anonymous_access_allowed:
                return Principal(cfg.anonymous_user, frozenset({cfg.anonymous_group}),
                                 anonymous=True)
            raise LoginFailed("anonymous access is not allowed")
        if request.username is None:
            raise LoginFailed("no user name")
        return self.table.check(request.username, request.password)
