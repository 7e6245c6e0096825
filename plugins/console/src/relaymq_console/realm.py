"""The console's own users from a Jetty realm file, as ActiveMQ's web console has
them (`conf/jetty-realm.properties`, named by jetty.xml's `securityLoginService`):

    # username: password [, role ...]
    admin: admin, admin
    user: user, user

Passwords are plain or `MD5:` (hex MD5 of the password, Jetty's form). Jetty's
`OBF:` and `CRYPT:` forms are refused with one line at start: give the password
plainly (and keep the file `chmod 600`) or as `MD5:`.

`Realm` re-reads the file when it changed (one `stat` per lookup: its modification
time, size or inode differ), for new logins and for the sessions of its users alike;
a changed file that cannot be read or parsed keeps the previous users, logged."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from relaymq.errors import ConfigError

log = logging.getLogger("relaymq.console")


@dataclass(frozen=True)
class RealmUser:
    name: str
    password: str  # as in the file: plain or MD5:hex
    groups: frozenset[str]

    def check(self, password: str) -> bool:
        if self.password.startswith("MD5:"):
            given = hashlib.md5(password.encode(), usedforsecurity=False).hexdigest()
            return hmac.compare_digest(given, self.password[4:].strip().lower())
        return hmac.compare_digest(password.encode(), self.password.encode())


def load_realm(path: str) -> dict[str, RealmUser]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"<console usersFile=\"{path}\">: cannot read it "
                          f"({exc.strerror or exc})") from exc
    users: dict[str, RealmUser] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        name, sep, rest = line.partition(":")
        if not sep:
            name, sep, rest = line.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"{path}:{number}: expected 'user: password[, role ...]'")
        password, *roles = [p.strip() for p in rest.split(",")]
        if password.startswith(("OBF:", "CRYPT:")):
            raise ConfigError(f"{path}:{number}: user {name}'s password is in Jetty's "
                              f"{password.split(':')[0]} form, which RelayMQ does not read; "
                              "give it plainly or as MD5:<hex md5>")
        users[name] = RealmUser(name, password, frozenset(r for r in roles if r))
    return users


class Realm:
    """The users of the realm file `path`, as the file is now."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp = self._stat()
        self._users = load_realm(path)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def get(self, name: str) -> RealmUser | None:
        """The user `name` as the file has it now, or None."""
        stamp = self._stat()
        if stamp is not None and stamp != self._stamp:  # gone: being replaced, keep them
            self._stamp = stamp
            try:
                self._users = load_realm(self.path)
            except ConfigError as exc:
                log.error("console: keeping the users of %s as they were: %s", self.path, exc)
            else:
                log.info("console: re-read %s (%d users)", self.path, len(self._users))
        return self._users.get(name)
