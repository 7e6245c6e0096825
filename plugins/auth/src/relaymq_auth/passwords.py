"""Stored passwords: plain text (warned), scrypt hashes, and ``ENC(...)``.

* ``$scrypt$ln=14,r=8,p=1$<salt>$<hash>`` (base64, no padding) is what
  ``relaymq passwd`` prints; checking it costs what scrypt costs, so the broker
  checks it in a worker thread, never on the event loop.
* ``ENC(<base64>)`` is decrypted once when the configuration loads, with the key
  in ``ACTIVEMQ_ENCRYPTION_PASSWORD`` (or ``RELAYMQ_ENCRYPTION_PASSWORD``) and the
  algorithm in ``RELAYMQ_ENCRYPTION_ALGORITHM`` (default ``PBEWithMD5AndDES``,
  ActiveMQ's); see `relaymq_auth.jasypt`.
* anything else is a plain password, compared in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from relaymq_auth import jasypt

SCRYPT = "$scrypt$"
KEY_VARIABLES = ("ACTIVEMQ_ENCRYPTION_PASSWORD", "RELAYMQ_ENCRYPTION_PASSWORD")
ALGORITHM_VARIABLE = "RELAYMQ_ENCRYPTION_ALGORITHM"
_ENC = re.compile(r"^ENC\((.*)\)$", re.S)
_SCRYPT = re.compile(r"^\$scrypt\$ln=(\d+),r=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$")
#: scrypt's memory is 128 * r * 2**ln bytes: refuse parameters that would take
#: more than 256 MiB per check (a hostile or mistyped hash must not exhaust memory)
_MAX_MEMORY = 256 * 1024 * 1024


class PasswordFormatError(ValueError):
    """A stored password that cannot be used (bad hash, ENC without a key)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def hash_password(password: str, *, ln: int = 14, r: int = 8, p: int = 1) -> str:
    """A scrypt hash of `password` in the ``$scrypt$`` form (16 bytes of salt)."""
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=2 ** ln, r=r, p=p,
                            maxmem=_MAX_MEMORY + 1024 * 1024, dklen=32)
    return f"{SCRYPT}ln={ln},r={r},p={p}${_b64(salt)}${_b64(digest)}"


@dataclass(frozen=True, slots=True)
class StoredPassword:
    """One user's password as configured, ready to check."""

    kind: str  # "plain" | "scrypt"
    value: str  # the plain text (decrypted for ENC) or the hash

    @property
    def slow(self) -> bool:
        """Checking costs a KDF run (do it off the event loop)."""
        return self.kind == "scrypt"

    @property
    def cost(self) -> tuple[int, int, int]:
        """A scrypt hash's (ln, r, p); (0, 0, 0) for a plain password."""
        m = _SCRYPT.match(self.value) if self.kind == "scrypt" else None
        return (int(m[1]), int(m[2]), int(m[3])) if m is not None else (0, 0, 0)

    def check(self, given: str) -> bool:
        if self.kind == "plain":
            return hmac.compare_digest(self.value.encode("utf-8"), given.encode("utf-8"))
        m = _SCRYPT.match(self.value)
        assert m is not None  # validated in parse()
        ln, r, p = int(m[1]), int(m[2]), int(m[3])
        expected = _unb64(m[5])
        digest = hashlib.scrypt(given.encode("utf-8"), salt=_unb64(m[4]), n=2 ** ln, r=r, p=p,
                                maxmem=_MAX_MEMORY + 1024 * 1024, dklen=len(expected))
        return hmac.compare_digest(digest, expected)


def parse(stored: str, environ: Mapping[str, str] | None = None) -> StoredPassword:
    """Read a configured password.

    :raises PasswordFormatError: a malformed ``$scrypt$`` hash, or an ``ENC(...)``
        that cannot be decrypted (no key in the environment, wrong key).
    """
    if stored.startswith(SCRYPT):
        m = _SCRYPT.match(stored)
        if m is None:
            raise PasswordFormatError(
                "a $scrypt$ password must read $scrypt$ln=N,r=N,p=N$<salt>$<hash> "
                "(print one with `relaymq passwd`)")
        ln, r, p = int(m[1]), int(m[2]), int(m[3])
        if not (1 <= ln <= 24 and 1 <= r <= 64 and 1 <= p <= 16) or 128 * r * (2 ** ln) > _MAX_MEMORY:
            raise PasswordFormatError(f"scrypt parameters ln={ln},r={r},p={p} are out of range")
        return StoredPassword("scrypt", stored)
    m = _ENC.match(stored.strip())
    if m is not None:
        env = os.environ if environ is None else environ
        key = next((env[v] for v in KEY_VARIABLES if env.get(v)), None)
        if key is None:
            raise PasswordFormatError(
                f"an ENC(...) password needs the key in {KEY_VARIABLES[0]} "
                f"(or {KEY_VARIABLES[1]}), which is not set")
        algorithm = env.get(ALGORITHM_VARIABLE) or jasypt.DES
        try:
            return StoredPassword("plain", jasypt.decrypt(m[1], key, algorithm))
        except jasypt.EncryptionError as exc:
            raise PasswordFormatError(f"ENC(...): {exc}") from None
    return StoredPassword("plain", stored)


def is_plain_text(stored: str) -> bool:
    """Written in the configuration as the password itself (warned about)."""
    return not stored.startswith(SCRYPT) and _ENC.match(stored.strip()) is None
