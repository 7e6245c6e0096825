"""Who is asking: a console session (cookie) or HTTP Basic credentials, checked
against relaymq-auth's users and groups (`broker.extensions["auth"]`); and what they
may do to a destination, by the broker's authorization map (`Access.authorize`)."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from relaymq.broker.security import Principal
from relaymq.errors import SecurityError
from relaymq.model.destination import Destination
from starlette.requests import Request

from relaymq_console.config import ConsoleConfig, open_console
from relaymq_console.realm import Realm, RealmUser
from relaymq_console.sessions import COOKIE, LoginThrottle, Sessions

log = logging.getLogger("relaymq.console")

UNSAFE = ("POST", "PUT", "PATCH", "DELETE")

#: the authorization-map action each console operation on a destination needs (the
#: actions the broker checks for its clients: read, write, admin); a move or copy also
#: needs `write` on its target, and `admin` there when that makes a new queue, as a
#: send that creates a queue does
OPERATION_ACTIONS = {
    "view": "read", "browse": "read", "copy": "read", "send": "write",
    "create": "admin", "delete": "admin", "purge": "admin", "pause": "admin",
    "resume": "admin", "remove": "admin", "retry": "admin", "move": "admin",
    "delete-subscription": "admin",
}


class Denied(Exception):
    """401 (not logged in), 403 (not allowed) or 429 (too many failed logins)."""

    def __init__(self, status: int, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@dataclass
class User:
    name: str
    admin: bool
    principal: Any
    csrf: str | None  # None: Basic auth, no CSRF needed


class Access:
    def __init__(self, broker: Any, config: ConsoleConfig) -> None:
        self.broker = broker
        self.config = config
        self.sessions = Sessions(config.session_timeout)
        self.throttle = LoginThrottle(window=max(1, config.login_failure_window))
        #: the console's own users (`usersFile`, a Jetty realm) instead of relaymq-auth's
        #: (re-read when the file changes)
        self.realm: Realm | None = (
            Realm(config.users_file) if config.users_file and config.authenticate else None)

    @property
    def auth(self) -> Any:
        return self.broker.extensions.get("auth")

    @property
    def open(self) -> bool:
        """Nobody logs in (no users anywhere, or `authenticate="false"`)."""
        return open_console(self.config, self.auth is not None)

    async def login(self, name: str, password: str, address: str) -> tuple[str, User]:
        """Check credentials; returns a session token for the cookie."""
        principal, admin = await self._authenticate(name, password, address)
        token, session = self.sessions.create(principal, admin)
        return token, User(name, admin, principal, session.csrf)

    async def _authenticate(self, name: str, password: str, address: str) -> tuple[Any, bool]:
        auth = self.auth
        if self.open:
            return None, True  # no users: a local console lets anybody in (documented)
        async with self.throttle.turn(address):  # a burst counts one attempt at a time
            principal = await self._check_password(auth, name, password, address)
        admin = self._role(principal)
        if admin is None:
            raise Denied(403, f"user {name} is in neither console group "
                              f"({self.config.admin_group}, {self.config.viewer_group})")
        return principal, admin

    async def _check_password(self, auth: Any, name: str, password: str,
                              address: str) -> Any:
        """The principal of `name` and `password`, unless `address` is blocked (429) or
        they are wrong (401, counted against the address)."""
        wait = self.throttle.blocked(address)
        if wait:
            raise Denied(429, f"too many failed logins from this address; try again in {wait} "
                              f"second{'s' if wait != 1 else ''}", {"retry-after": str(wait)})
        principal: Any
        if self.realm is not None:
            known = self.realm.get(name)
            if known is None or not known.check(password):
                self.throttle.failed(address)
                raise Denied(401, "login failed: wrong user name or password")
            principal = known
        else:
            try:
                principal = await auth.authenticate(name, password, transport="http",
                                                    remote_address=address)
            except SecurityError as exc:
                self.throttle.failed(address)
                raise Denied(401, f"login failed: {exc}") from None
        return principal

    def _role(self, principal: Any) -> bool | None:
        """True for an admin, False for a viewer, None outside both console groups."""
        groups = set(getattr(principal, "groups", ()))
        if self.config.admin_group in groups:
            return True
        if self.config.viewer_group in groups:
            return False
        return None

    def _current(self, principal: Any) -> Any:
        """A session's principal as the users are now (None: no longer a user)."""
        if self.realm is not None:  # as the file is now; a new password ends sessions too
            now = self.realm.get(getattr(principal, "name", ""))
            return now if now is not None and now.password == principal.password else None
        current = getattr(self.auth, "current_principal", None)
        return current(principal) if current is not None else principal

    async def user(self, request: Request) -> User:
        """The user of `request`, or Denied(401)."""
        if self.open:
            return User("anonymous", True, None, None)
        token = request.cookies.get(COOKIE)
        session = self.sessions.get(token)
        if session is not None:
            # checked against the users as they are now: a user removed, or no longer in
            # a console group, loses the session at once; a demoted admin is a viewer
            name = getattr(session.principal, "name", "?")
            principal = self._current(session.principal)
            admin = self._role(principal) if principal is not None else None
            if admin is None:
                self.sessions.drop(token)
                log.info("console: session of %s ended: no longer a user in a console group",
                         name)
                raise Denied(401, f"user {name} may no longer use the console; log in again")
            session.principal, session.admin = principal, admin
            return User(name, admin, principal, session.csrf)
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            try:
                name, _, password = base64.b64decode(header[6:]).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise Denied(401, "malformed Authorization header") from None
            address = request.client.host if request.client else "?"
            principal, admin = await self._authenticate(name, password, address)
            return User(name, admin, principal, None)
        raise Denied(401, "log in first")

    async def check(self, request: Request, *, admin: bool, csrf: str | None = None) -> User:
        """The user, who must be an admin for `admin` actions; state changes made with a
        session cookie must carry its CSRF token."""
        user = await self.user(request)
        if admin and not user.admin:
            raise Denied(403, f"user {user.name} may only view (not in {self.config.admin_group})")
        if request.method in UNSAFE and user.csrf is not None:
            given = csrf or request.headers.get("x-csrf-token")
            if given != user.csrf:
                raise Denied(403, "missing or wrong CSRF token")
        return user

    def authorize(self, user: User, operation: str, dest: Destination, request: Request,
                  to: Destination | None = None) -> None:
        """Denied(403), with an audit line, unless the broker's authorization map lets
        `user`'s groups do `operation` (`OPERATION_ACTIONS`) on `dest` (and write to
        `to`). Without relaymq-auth's `<authorizationPlugin>` everything is allowed."""
        if operation == "send":
            needed = self._writes(dest)
        else:
            needed = [(OPERATION_ACTIONS[operation], dest, False)]
            if to is not None:
                needed += self._writes(to)
        refused = self._refusal(user, operation, needed, request)
        if refused is not None:
            raise Denied(403, refused)

    def visible(self, user: User) -> Callable[[Destination], bool] | None:
        """What `user` may see in listings and statistics: the destinations the map
        grants them `read` on (Artemis filters its management views by `view` the
        same way); None when that is everything (an admin of the console, no
        `<authorizationPlugin>`, no users)."""
        auth = self.auth
        if user.admin or auth is None or user.principal is None \
                or getattr(auth, "authorization", None) is None:
            return None
        principal = self._principal(user)
        return lambda dest: bool(auth.authorize(principal, "read", dest))

    def check_view(self, user: User, dest: Destination, request: Request) -> None:
        """Denied(403), audited, when `user` may not see `dest` (`visible`)."""
        if self.visible(user) is not None:
            self.authorize(user, "view", dest, request)

    def send_refusal(self, user: User, operation: str, dest: Destination,
                     request: Request) -> str | None:
        """Why the map does not let `user` send to `dest` as part of `operation` (a
        DLQ retry): `write` there, and `admin` when it is a queue that does not exist
        (the send makes it); None when it does. A refusal is audited."""
        return self._refusal(user, operation, self._writes(dest), request)

    def _writes(self, dest: Destination) -> list[tuple[str, Destination, bool]]:
        """What a send to `dest` needs, as the broker asks its clients."""
        needed = [("write", dest, True)]
        if dest.is_queue and self.broker.management.queue(dest) is None:
            needed.append(("admin", dest, True))
        return needed

    def _refusal(self, user: User, operation: str,
                 needed: list[tuple[str, Destination, bool]], request: Request) -> str | None:
        """The first of `needed` (action, destination, whether it is sent to) the map
        refuses, audited and said in words; None when it grants them all."""
        auth = self.auth
        if auth is None or user.principal is None:
            return None
        principal = self._principal(user)
        for action, target, into in needed:
            if not auth.authorize(principal, action, target):
                address = request.client.host if request.client else None
                auth.audit_denied(principal, f"{operation}:{action}", target, transport="http",
                                  remote=address)
                return (f"User {user.name} is not authorized to {operation} "
                        f"{'to ' if into else ''}{target}: the broker's authorization map "
                        f"grants {action} on it to none of the user's groups")
        return None

    @staticmethod
    def _principal(user: User) -> Principal:
        principal = user.principal
        if not isinstance(principal, Principal):  # a usersFile user: its roles are its groups
            principal = Principal(user.name, frozenset(getattr(principal, "groups", ())))
        return principal

    def audit(self, user: User, operation: str, target: Any, request: Request) -> None:
        auth = self.auth
        address = request.client.host if request.client else None
        if auth is not None and user.principal is not None \
                and not isinstance(user.principal, RealmUser):
            auth.audit_operation(user.principal, operation, target, transport="http",
                                 remote=address)
            return  # relaymq-auth writes the audit line
        logging.getLogger("relaymq.audit").info("console: %s %s %s from %s", user.name,
                                                operation, target, address)
