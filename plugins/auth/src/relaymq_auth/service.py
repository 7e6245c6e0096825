"""`SecurityService`: the one object that authenticates, authorizes and audits.

Every configured element of this plugin installs itself into the broker's
service (``broker.extensions["auth"]``): one authentication element (simple,
JAAS, certificate or dual) and at most one ``<authorizationPlugin>``. The
service answers the kernel's ``relaymq_authenticate`` / ``relaymq_authorize``
hooks, and management and the console call the same two methods:

```python
from relaymq_auth import security_service

auth = security_service(broker)                # None when the broker has no auth plugin
principal = await auth.authenticate("ops", "secret", transport="http", remote_address=ip)
if not auth.authorize(principal, "admin", Destination.queue("orders.eu")):
    ...                                         # refuse the purge
auth.audit_operation(principal, "purge", Destination.queue("orders.eu"), remote=ip)
```
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from relaymq.broker.security import ConnectRequest, Principal
from relaymq.config.model import Origin
from relaymq.config.report import at
from relaymq.errors import ConfigError, SecurityError
from relaymq.hookspecs import hookimpl
from relaymq.model.destination import Destination

from relaymq_auth.audit import AuditLog
from relaymq_auth.authn import Authenticator, LoginFailed
from relaymq_auth.scram import ScramProof, ScramProvider
from relaymq_auth.throttle import LoginThrottle, host_of

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.broker.connection import ClientConnection


log = logging.getLogger("relaymq.auth")

class Authorization(Protocol):
    """What the service asks of an authorization map (`AuthorizationMap`)."""

    def allowed(self, principal: Principal, action: str, dest: Destination) -> bool: ...

    def forget(self) -> None: ...


EXTENSION = "auth"
#: what AMQP asks for before offering SASL EXTERNAL
CERTIFICATE_EXTENSION = "certificate-login"
#: what AMQP asks for before offering SCRAM-SHA-256/512
SCRAM_EXTENSION = "sasl-scram"


class SecurityService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.authenticator: Authenticator | None = None
        self.authorization: Authorization | None = None
        self._origins: dict[str, Origin] = {}
        #: element tag -> the installed object, for reloads (``reload(element)``)
        self.elements: dict[str, Any] = {}
        self.throttle = LoginThrottle()
        self.audit = AuditLog()
        self.scram = ScramProvider(self)

    @classmethod
    def of(cls, broker: Broker) -> SecurityService:
        """The broker's service, made and registered on first use."""
        service = broker.extensions.get(EXTENSION)
        if service is None:
            service = cls(broker)
            broker.extensions[EXTENSION] = service
            broker.plugins.register(service, name="relaymq-auth",
                                    description="relaymq-auth (authentication and authorization)")
        assert isinstance(service, SecurityService)
        return service

    # -- assembly ------------------------------------------------------------------------
    def set_authenticator(self, authenticator: Authenticator, origin: Origin) -> None:
        if self.authenticator is not None:
            first = self.authenticator.tag
            raise ConfigError(
                f"<{authenticator.tag}>{at(origin)}: the broker already authenticates with "
                f"<{first}>{at(self._origins.get('authn'))}; configure one authentication plugin")
        self.authenticator = authenticator
        self._origins["authn"] = origin
        self.elements[authenticator.tag] = authenticator
        if authenticator.accepts_certificates:
            self.broker.extensions[CERTIFICATE_EXTENSION] = self
        if hasattr(authenticator, "lookup"):  # knows passwords: SCRAM can derive keys
            self.broker.extensions[SCRAM_EXTENSION] = self.scram

    def set_authorization(self, amap: Authorization, origin: Origin,
                          owner: Any = None) -> None:
        if self.authorization is not None:
            raise ConfigError(f"<authorizationPlugin>{at(origin)}: there is already one "
                              f"at {self._origins.get('authz')}; merge their entries")
        self.authorization = amap
        self._origins["authz"] = origin
        if owner is not None:
            self.elements["authorizationPlugin"] = owner

    def security_changed(self) -> None:
        """Users, groups or entries changed: drop every cached decision."""
        if self.authorization is not None:
            self.authorization.forget()
        self.scram.forget()
        self.broker.security_changed()

    # -- the API management and the console use -----------------------------------------------
    async def authenticate(self, username: str | None, password: str | None = None, *,
                           transport: str = "management", remote_address: str | None = None,
                           certificates: Iterable[object] = ()) -> Principal:
        """The principal (user and groups) for these credentials.

        :raises SecurityError: refused; the message does not say whether the user exists.
        """
        return await self.login(ConnectRequest(
            username=username, password=password, transport=transport,
            remote_address=remote_address, certificates=list(certificates)))

    def authorize(self, principal: Principal, action: str, destination: Destination) -> bool:
        """May `principal` do `action` (``read``, ``write``, ``admin``) on `destination`?
        True for everything when no ``<authorizationPlugin>`` is configured."""
        if principal.system or self.authorization is None:
            return True
        return self.authorization.allowed(principal, action, destination)

    def current_principal(self, principal: Principal) -> Principal | None:
        """`principal` as the configured users have it now (after a reload, or a
        properties file with ``reload=true`` that changed): with the groups its user has
        now, or None when its user is no longer configured. A principal that is not
        looked up in a user table (anonymous, the broker's own, any principal of an
        authenticator without one) comes back as it is."""
        lookup = getattr(self.authenticator, "lookup", None)
        if lookup is None or principal.system or principal.anonymous:
            return principal
        user = lookup(principal.name)
        if user is None:
            return None
        if user.groups == principal.groups:
            return principal
        return Principal(principal.name, user.groups)

    def audit_denied(self, principal: Principal, action: str, destination: object, *,
                     transport: str | None = None, remote: str | None = None) -> None:
        """Write a refusal `authorize` answered on a principal's behalf (the console's)
        to the audit log, as the broker writes its clients' refusals."""
        self.audit.denied(principal, action, destination, transport, remote)

    def audit_operation(self, principal: Principal | None, operation: str,
                        destination: object, *, transport: str | None = None,
                        remote: str | None = None, **details: object) -> None:
        """Write an administrative operation (``delete``, ``purge``, ``move``, ...) to
        the audit log; management calls this after it acted."""
        self.audit.operation(principal, operation, destination, transport, remote, **details)

    # -- logins ------------------------------------------------------------------------
    async def login(self, request: ConnectRequest) -> Principal:
        authenticator = self.authenticator
        if authenticator is None:
            raise SecurityError("User is not authenticated: the broker has no authentication "
                                "plugin")
        proof = request.sasl
        if isinstance(proof, ScramProof) and proof.issuer is self.scram:
            self.audit.login(proof.principal, request.transport, request.remote_address,
                             proof.mechanism)
            return proof.principal
        if request.sasl is not None:
            raise SecurityError("User is not authenticated: unknown SASL result")
        host = host_of(request.remote_address)
        method = "certificate" if request.certificates and authenticator.accepts_certificates \
            else ("anonymous" if request.username is None else "password")
        async with self.throttle.turn(host):
            try:
                principal = await asyncio.to_thread(authenticator.login, request)
            except LoginFailed as exc:
                self.throttle.failed(host)
                self.audit.login_failed(request.username, request.transport,
                                        request.remote_address, exc.reason,
                                        self.throttle.failures(host) if host else 0)
                if method == "certificate" or (authenticator.accepts_certificates
                                               and request.username is None):
                    raise SecurityError("The client certificate is not accepted.") from None
                name = "null" if request.username is None else request.username
                raise SecurityError(f"User name [{name}] or password is invalid.") from None
            self.throttle.succeeded(host)
        self.audit.login(principal, request.transport, request.remote_address, method)
        return principal

    async def throttle_wait(self, remote_address: str | None) -> None:
        """Wait out the penalty of `remote_address`'s recent failures (SCRAM's first step)."""
        host = host_of(remote_address)
        wait = self.throttle.delay(host) if host else 0.0
        if wait:
            await asyncio.sleep(wait)

    # -- kernel hooks ------------------------------------------------------------------------
    @hookimpl
    def relaymq_configure(self) -> None:
        if self.authorization is not None and self.authenticator is None:
            raise ConfigError(
                f"<authorizationPlugin>{at(self._origins.get('authz'))} needs an authentication "
                "plugin (<simpleAuthenticationPlugin>, <jaasAuthenticationPlugin>, ...): "
                "without one no client has a user or groups to authorize")

    @hookimpl
    def relaymq_config_reloaded(self, config: Any) -> None:
        """SIGHUP: users, passwords, groups and entries change at once; connections
        keep the groups they logged in with, every cached decision is dropped."""
        changed = []
        for element in getattr(config, "plugins", ()):
            owner = self.elements.get(element.tag)
            if owner is None:
                continue
            try:
                owner.reload(element, self)
            except (ConfigError, OSError, ValueError) as exc:
                log.error("configuration reload: <%s> keeps its previous settings: %s",
                          element.tag, exc)
                continue
            changed.append(element.tag)
        if changed:
            self.security_changed()
            log.info("configuration reload: %s applied", ", ".join(f"<{t}>" for t in changed))

    @hookimpl
    def relaymq_authenticate(self, request: ConnectRequest) -> Awaitable[Principal] | None:
        if self.authenticator is None:
            return None
        return self.login(request)

    @hookimpl
    def relaymq_authorize(self, principal: Principal, action: str, destination: Destination,
                          connection: ClientConnection | None) -> bool | None:
        if self.authorization is None or principal.system:
            return None
        allowed = self.authorization.allowed(principal, action, destination)
        transport = getattr(connection, "transport", None)
        remote = getattr(connection, "remote_address", None)
        if not allowed:
            self.audit.denied(principal, action, destination, transport, remote)
        elif action == "admin":
            self.audit.operation(principal, "create", destination, transport, remote)
        return allowed

    def describe(self) -> dict[str, Any]:
        return {"authentication": self.authenticator.tag if self.authenticator else None,
                "authorization": self.authorization is not None}


def security_service(broker: Broker) -> SecurityService | None:
    """The broker's `SecurityService`, or None when no auth element is configured."""
    service = broker.extensions.get(EXTENSION)
    return service if isinstance(service, SecurityService) else None
