"""The JAAS login modules ActiveMQ ships, and JAAS' control-flag rules.

* ``org.apache.activemq.jaas.PropertiesLoginModule``: ``users.properties``
  (``user=password``) and ``groups.properties`` (``group=user1,user2``), options
  ``org.apache.activemq.jaas.properties.user`` / ``.group``; ``reload=true`` re-reads
  a file when it changed.
* ``org.apache.activemq.jaas.TextFileCertificateLoginModule``: the same files but
  ``user=<subject DN>``, options ``org.apache.activemq.jaas.textfiledn.user`` / ``.group``.
* ``org.apache.activemq.jaas.GuestLoginModule``: everyone is the guest user
  (``org.apache.activemq.jaas.guest.user``, default ``guest``) in the guest group
  (``org.apache.activemq.jaas.guest.group``, default ``guests``);
  ``credentialsInvalidate=true`` makes it fail for clients that gave a password.

Relative file names are relative to the directory of login.config, as in ActiveMQ.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from relaymq.broker.security import ConnectRequest
from relaymq.config.properties import parse_java_properties

from relaymq_auth.authn import LoginFailed
from relaymq_auth.certs import dn_key, subject_dn
from relaymq_auth.loginconfig import LoginConfigError, ModuleConfig
from relaymq_auth.passwords import PasswordFormatError, is_plain_text, parse
from relaymq_auth.users import User, UserTable

log = logging.getLogger("relaymq.auth")

PROPS_USER = "org.apache.activemq.jaas.properties.user"
PROPS_GROUP = "org.apache.activemq.jaas.properties.group"
DN_USER = "org.apache.activemq.jaas.textfiledn.user"
DN_GROUP = "org.apache.activemq.jaas.textfiledn.group"
GUEST_USER = "org.apache.activemq.jaas.guest.user"
GUEST_GROUP = "org.apache.activemq.jaas.guest.group"

#: (user name or None when the module names nobody, groups)
Identity = tuple[str | None, frozenset[str]]


class _WatchedFiles:
    """A users file and a groups file, re-read on change when `reload` is set."""

    def __init__(self, users: Path, groups: Path, reload: bool,
                 build: Callable[[dict[str, str], dict[str, frozenset[str]]], None],
                 on_reload: Callable[[], None]) -> None:
        self.users_path, self.groups_path, self.reload = users, groups, reload
        self._build = build
        self._on_reload = on_reload
        self._lock = threading.Lock()
        self._stamp: tuple[float, int, float, int] | None = None
        self.load()

    def _stat(self) -> tuple[float, int, float, int]:
        u, g = self.users_path.stat(), self.groups_path.stat()
        return (u.st_mtime, u.st_size, g.st_mtime, g.st_size)

    def load(self) -> None:
        with self._lock:
            try:
                stamp = self._stat()
                users = parse_java_properties(self.users_path.read_text(encoding="utf-8"))
                raw_groups = parse_java_properties(self.groups_path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise LoginConfigError(f"cannot read {exc.filename}: {exc.strerror}") from exc
            membership: dict[str, set[str]] = {}
            for group, members in raw_groups.items():
                for member in members.split(","):
                    if member.strip():
                        membership.setdefault(member.strip(), set()).add(group.strip())
            self._build(users, {u: frozenset(g) for u, g in membership.items()})
            self._stamp = stamp

    def refresh(self) -> None:
        """Re-read when `reload` is on and either file changed (called per login)."""
        if not self.reload:
            return
        try:
            changed = self._stat() != self._stamp
        except OSError:
            return  # a file being replaced: keep what we have
        if changed:
            try:
                self.load()
            except (LoginConfigError, PasswordFormatError) as exc:
                log.error("keeping the previous users and groups: %s", exc)
                return
            log.info("reloaded %s and %s", self.users_path, self.groups_path)
            self._on_reload()


class PropertiesLoginModule:
    def __init__(self, module: ModuleConfig, base: Path, on_reload: Callable[[], None]) -> None:
        users = _path(module, PROPS_USER, "users.properties", base)
        groups = _path(module, PROPS_GROUP, "groups.properties", base)
        self.table = UserTable()
        self.files = _WatchedFiles(users, groups, _true(module.options.get("reload")),
                                   self._build, on_reload)

    def _build(self, users: dict[str, str], groups: dict[str, frozenset[str]]) -> None:
        table: dict[str, User] = {}
        plain = []
        for name, stored in users.items():
            try:
                password = parse(stored)
            except PasswordFormatError as exc:
                raise PasswordFormatError(f"{self.files_path_hint()}: user {name}: {exc}") from None
            if is_plain_text(stored):
                plain.append(name)
            table[name] = User(name, password, groups.get(name, frozenset()))
        if plain:
            log.warning("%s holds plain-text passwords for %s; store hashes from "
                        "`relaymq passwd` or ENC(...) values instead",
                        self.files_path_hint(), ", ".join(sorted(plain)))
        self.table = UserTable(table)

    def files_path_hint(self) -> str:
        files = getattr(self, "files", None)
        return str(files.users_path) if files is not None else "users.properties"

    def login(self, request: ConnectRequest) -> Identity:
        self.files.refresh()
        if request.username is None:
            raise LoginFailed("no user name")
        principal = self.table.check(request.username, request.password)
        return principal.name, principal.groups


class TextFileCertificateLoginModule:
    def __init__(self, module: ModuleConfig, base: Path, on_reload: Callable[[], None]) -> None:
        users = _path(module, DN_USER, "users.properties", base)
        groups = _path(module, DN_GROUP, "groups.properties", base)
        self.by_dn: dict[tuple[tuple[str, str], ...], tuple[str, frozenset[str]]] = {}
        self.files = _WatchedFiles(users, groups, _true(module.options.get("reload")),
                                   self._build, on_reload)

    def _build(self, users: dict[str, str], groups: dict[str, frozenset[str]]) -> None:
        self.by_dn = {dn_key(dn): (name, groups.get(name, frozenset()))
                      for name, dn in users.items()}

    def login(self, request: ConnectRequest) -> Identity:
        self.files.refresh()
        dns = [d for d in (subject_dn(c) for c in request.certificates) if d]
        if not dns:
            raise LoginFailed("no client certificate")
        for dn in dns:
            found = self.by_dn.get(dn_key(dn))
            if found is not None:
                return found
        raise LoginFailed(f"certificate {dns[0]} is not in {self.files.users_path.name}")


class GuestLoginModule:
    def __init__(self, module: ModuleConfig, base: Path, on_reload: Callable[[], None]) -> None:
        self.user = module.options.get(GUEST_USER, "guest")
        self.group = module.options.get(GUEST_GROUP, "guests")
        self.credentials_invalidate = _true(module.options.get("credentialsInvalidate"))

    def login(self, request: ConnectRequest) -> Identity:
        if self.credentials_invalidate and request.password:
            raise LoginFailed("credentials given (credentialsInvalidate)")
        return self.user, frozenset({self.group})


MODULES = {
    "PropertiesLoginModule": PropertiesLoginModule,
    "TextFileCertificateLoginModule": TextFileCertificateLoginModule,
    "GuestLoginModule": GuestLoginModule,
}


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def _path(module: ModuleConfig, option: str, default: str, base: Path) -> Path:
    path = Path(module.options.get(option, default))
    return path if path.is_absolute() else base / path


class ModuleChain:
    """One login.config entry: its modules with JAAS' control flags.

    ``required`` must succeed (the rest still run), ``requisite`` must succeed
    (stop at once otherwise), ``sufficient`` ends the login with success when no
    required module failed before it, ``optional`` only adds principals. The user
    is the first succeeding module's user; groups are the union of all.
    """

    def __init__(self, modules: list[tuple[ModuleConfig, object]]) -> None:
        self.modules = modules

    @property
    def uses_certificates(self) -> bool:
        return any(isinstance(m, TextFileCertificateLoginModule) for _, m in self.modules)

    def login(self, request: ConnectRequest) -> Identity:
        name: str | None = None
        groups: set[str] = set()
        failure: LoginFailed | None = None
        succeeded = False
        for config, module in self.modules:
            try:
                user, more = module.login(request)  # type: ignore[attr-defined]
            except LoginFailed as exc:
                if config.flag == "requisite":
                    raise
                if config.flag == "required" and failure is None:
                    failure = exc
                continue
            succeeded = True
            name = name or user
            groups |= more
            if config.flag == "sufficient" and failure is None:
                break
        if failure is not None:
            raise failure
        if not succeeded:
            raise LoginFailed("no login module accepted the client")
        return name, frozenset(groups)
