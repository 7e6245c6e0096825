"""Users with their (stored) passwords and groups, and checking a password."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from relaymq.broker.security import Principal

from relaymq_auth.authn import LoginFailed
from relaymq_auth.passwords import StoredPassword, hash_password, parse

#: compared against when the user does not exist, so an unknown name costs what a
#: wrong password costs: one per scrypt cost (ln, r, p), made when first needed
_DUMMIES: dict[tuple[int, int, int], StoredPassword] = {}


def _dummy(cost: tuple[int, int, int]) -> StoredPassword:
    found = _DUMMIES.get(cost)
    if found is None:
        ln, r, p = cost
        found = _DUMMIES[cost] = parse(hash_password("relaymq-unknown-user", ln=ln, r=r, p=p))
    return found


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

    @property
    def usual_cost(self) -> tuple[int, int, int]:
        """The scrypt cost most of the table's hashes have (an unknown name is
        checked at it, so it takes what a wrong password of a real user takes)."""
        costs: dict[tuple[int, int, int], int] = {}
        for u in self.users.values():
            if u.password.slow:
                costs[u.password.cost] = costs.get(u.password.cost, 0) + 1
        return max(costs, key=lambda c: (costs[c], c)) if costs else (10, 8, 1)

    def check(self, username: str | None, password: str | None) -> Principal:
        user = self.users.get(username) if username is not None else None
        given = password or ""
        if user is None:
            if username is not None and self.any_slow:
                _dummy(self.usual_cost).check(given)  # as long as a real check takes
            else:
                hmac.compare_digest(b"x", given.encode("utf-8", "replace"))
            raise LoginFailed("unknown user")
        if password is None or not user.password.check(given):
            raise LoginFailed("wrong password")
        return Principal(user.name, user.groups)
