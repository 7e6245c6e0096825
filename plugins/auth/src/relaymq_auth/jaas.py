"""``<jaasAuthenticationPlugin>``, ``<jaasCertificateAuthenticationPlugin>`` and
``<jaasDualAuthenticationPlugin>``: logins described by a JAAS ``login.config``.

```xml
<plugins>
  <jaasAuthenticationPlugin configuration="activemq"/>
  <!-- or, for TLS client certificates (needClientAuth on the connector) -->
  <jaasCertificateAuthenticationPlugin configuration="CertLogin"/>
  <!-- or both: certificate logins on TLS connections, passwords on the others -->
  <jaasDualAuthenticationPlugin configuration="activemq" sslConfiguration="CertLogin"/>
</plugins>
```
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relaymq.broker.security import ConnectRequest, Principal
from relaymq.config.model import Origin, PluginElement
from relaymq.config.report import Report, at
from relaymq.config.typed import convert
from relaymq.errors import ConfigError

from relaymq_auth.authn import LoginFailed
from relaymq_auth.loginconfig import LoginConfigError, find_login_config, parse_login_config
from relaymq_auth.modules import MODULES, ModuleChain, PropertiesLoginModule
from relaymq_auth.passwords import PasswordFormatError
from relaymq_auth.service import SecurityService
from relaymq_auth.users import User

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker

DEFAULT_ENTRY = "activemq-domain"
DEFAULT_SSL_ENTRY = "activemq-ssl-domain"


@dataclass(slots=True)
class JaasConfig:
    #: the login.config entry for password logins
    configuration: str = DEFAULT_ENTRY
    #: ActiveMQ looks for login.config on its classpath; RelayMQ beside activemq.xml
    discover_login_config: bool = True
    #: RelayMQ: the login.config file (else $RELAYMQ_LOGIN_CONFIG, else beside activemq.xml)
    login_config: str | None = None
    origin: Origin = field(default_factory=Origin)


@dataclass(slots=True)
class JaasDualConfig(JaasConfig):
    #: the login.config entry for connections that presented a client certificate
    ssl_configuration: str = DEFAULT_SSL_ENTRY


class _JaasPlugin:
    Config: type[JaasConfig] = JaasConfig
    tag = "jaasAuthenticationPlugin"
    certificates = False

    def __init__(self, config: JaasConfig, origin: Origin | None = None,
                 environ: dict[str, str] | None = None) -> None:
        self.config = config
        self.origin = origin or config.origin
        self._on_reload: list[Any] = []
        env = dict(os.environ if environ is None else environ)
        self.login_config = find_login_config(config.login_config, self.origin.file, env)
        where = f"<{self.tag}>{at(self.origin)}"
        if self.login_config is None:
            raise ConfigError(
                f"{where}: no login.config found; put one beside the configuration file, "
                "set RELAYMQ_LOGIN_CONFIG, or add loginConfig=\"path\"")
        try:
            entries = parse_login_config(self.login_config.read_text(encoding="utf-8"),
                                         str(self.login_config))
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read {self.login_config}: {exc.strerror}") from exc
        except LoginConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        self.chains = {name: self._chain(entries, name, where) for name in self.entry_names()}

    def entry_names(self) -> list[str]:
        return [self.config.configuration]

    def _chain(self, entries: dict[str, Any], name: str, where: str) -> ModuleChain:
        modules = entries.get(name)
        if modules is None:
            raise ConfigError(f"{where}: {self.login_config} has no entry {name!r} "
                              f"(it has: {', '.join(entries) or 'none'})")
        base = self.login_config.parent if self.login_config else Path(".")
        built = []
        for module in modules:
            cls = MODULES.get(module.short_name)
            if cls is None:
                raise ConfigError(
                    f"{where}: {self.login_config}:{module.line}: login module "
                    f"{module.class_name} is not supported; RelayMQ provides "
                    f"{', '.join(MODULES)}")
            try:
                built.append((module, cls(module, base, self._reloaded)))
            except (LoginConfigError, PasswordFormatError) as exc:
                raise ConfigError(f"{where}: {exc}") from exc
        return ModuleChain(built)

    def _reloaded(self) -> None:
        for callback in self._on_reload:
            callback()

    @classmethod
    def from_element(cls, element: PluginElement, broker: Broker) -> _JaasPlugin:
        config = convert(cls.Config, element, strict=bool(getattr(broker, "strict", False)))
        return cls(config, element.origin)

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        """``relaymq config check``: the login.config, its entry and files load."""
        report = Report(strict=strict, quiet=True)  # returned: the caller reports them
        config = convert(cls.Config, element, strict=strict, report=report)
        report.raise_if_errors()
        cls(config, element.origin)
        return report.warnings

    def reload(self, element: PluginElement, service: SecurityService) -> None:
        """Re-read login.config and its files (SIGHUP), whatever their `reload` says."""
        fresh = type(self)(convert(self.Config, element), element.origin)
        fresh._on_reload = self._on_reload  # its modules report file changes to our callbacks
        self.config, self.chains, self.login_config = fresh.config, fresh.chains, fresh.login_config

    def install(self, broker: Broker) -> None:
        service = SecurityService.of(broker)
        service.set_authenticator(self, self.origin)
        self._on_reload.append(service.security_changed)

    # -- Authenticator ---------------------------------------------------------------
    @property
    def accepts_certificates(self) -> bool:
        return self.certificates

    def chain_for(self, request: ConnectRequest) -> ModuleChain:
        return self.chains[self.config.configuration]

    def lookup(self, username: str) -> User | None:
        """The user of the first PropertiesLoginModule of the password entry (SCRAM)."""
        for _, module in self.chains[self.config.configuration].modules:
            if isinstance(module, PropertiesLoginModule):
                module.files.refresh()
                return module.table.users.get(username)
        return None

    def login(self, request: ConnectRequest) -> Principal:
        name, groups = self.chain_for(request).login(request)
        if name is None:
            raise LoginFailed("the login modules named no user")
        return Principal(name, groups)


class JaasAuthenticationPlugin(_JaasPlugin):
    """Password logins (STOMP login/passcode, AMQP SASL PLAIN)."""


class JaasCertificateAuthenticationPlugin(_JaasPlugin):
    """Logins by TLS client certificate; connections without one are refused."""

    tag = "jaasCertificateAuthenticationPlugin"
    certificates = True

    def login(self, request: ConnectRequest) -> Principal:
        if not request.certificates:
            raise LoginFailed("no client certificate (the connector needs needClientAuth=true)")
        return super().login(request)


class JaasDualAuthenticationPlugin(_JaasPlugin):
    """Certificate logins on connections with a client certificate, passwords on others."""

    Config = JaasDualConfig
    tag = "jaasDualAuthenticationPlugin"
    certificates = True

    def entry_names(self) -> list[str]:
        assert isinstance(self.config, JaasDualConfig)
        return [self.config.configuration, self.config.ssl_configuration]

    def chain_for(self, request: ConnectRequest) -> ModuleChain:
        assert isinstance(self.config, JaasDualConfig)
        name = self.config.ssl_configuration if request.certificates else self.config.configuration
        return self.chains[name]
