"""Users with their (stored) passwords and groups, and checking a password."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from relaymq.broker.security import Principal

from relaymq_auth.authn import LoginFailed
from relaymq_auth.passwords import StoredPassword, hash_password, parse

#: compared against when the user does not exist, so an unknown name costs what a
#: wrong password costs (built lazily, at the cheapest scrypt cost that still runs it)
_DUMMY: StoredPassword | None = None


def _dummy() -> StoredPassword:
    global _DUMMY
    if _DUMMY is None:
        _DUMMY = parse(hash_password("relaymq-unknown-user", ln=10))
    return _DUMMY


@dataclass(frozen=True, slots=True)
class User:
    name: str
    password: StoredPassword
    groups: frozenset[str]


class UserTable:
    """A name -> user table; `check` is what a password login does."""

    def __init__(self, users: dict[str, User] | None = None) -> None:
        self.users: dict[str, User] = users or {}

    @property
    def any_slow(self) -> bool:
        return any(u.password.slow for u in self.users.values())

    def check(self, username: str | None, password: str | None) -> Principal:
        user = self.users.get(username) if username is not None else None
        given = password or ""
        if user is None:
            if username is not None and self.any_slow:
                _dummy().check(given)  # as long as a real check would take
            else:
                hmac.compare_digest(b"x", given.encode("utf-8", "replace"))
            raise LoginFailed("unknown user")
        if password is None or not user.password.check(given):
            raise LoginFailed("wrong password")
        return Principal(user.name, user.groups)
