"""SASL SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side.

The exchange runs in two steps a transport drives (relaymq-amqp finds this
object as ``broker.extensions["sasl-scram"]``, so it imports nothing from here)::

    exchange = provider.exchange("SCRAM-SHA-256", remote_address)
    server_first = await exchange.first(client_first)          # sasl-challenge
    server_final, proof = await exchange.final(client_final)   # sasl-outcome additional-data
    conn = await broker.connect(ConnectRequest(username=proof.username, sasl=proof, ...))

SCRAM needs the password itself (plain or ``ENC(...)``) to derive its keys; users
whose password is a ``$scrypt$`` hash cannot log in with SCRAM (use PLAIN over
TLS). Keys are derived once per user and mechanism with a salt made at start-up
(4096 PBKDF2 iterations) and dropped when users change. An unknown user gets a
made-up salt and fails at the proof, like a wrong password.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from relaymq.broker.security import Principal
from relaymq.errors import SecurityError

from relaymq_auth.throttle import host_of

if TYPE_CHECKING:
    from relaymq_auth.audit import AuditLog
    from relaymq_auth.throttle import LoginThrottle


class ScramBackend(Protocol):
    """What SCRAM needs of the security service (which owns the provider)."""

    authenticator: Any
    throttle: LoginThrottle
    audit: AuditLog

    async def throttle_wait(self, remote: Any) -> None: ...

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
ITERATIONS = 4096
_REFUSED = "SCRAM authentication failed"


@dataclass(frozen=True, slots=True)
class ScramProof:
    """A finished exchange; the service accepts only proofs it made itself."""

    username: str
    principal: Principal
    mechanism: str
    #: the provider that ran the exchange (compared by identity)
    issuer: object


@dataclass(frozen=True, slots=True)
class _Keys:
    salt: bytes
    stored_key: bytes
    server_key: bytes


def derive(password: str, salt: bytes, hash_name: str, iterations: int = ITERATIONS) -> _Keys:
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    return _Keys(salt, hashlib.new(hash_name, client_key).digest(), server_key)


def _attributes(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ValueError(f"malformed SCRAM attribute {part[:20]!r}")
        out.setdefault(part[0], part[2:])
    return out


class ScramProvider:
    """Derives and caches users' SCRAM keys; makes exchanges."""

    def __init__(self, service: ScramBackend) -> None:
        self.service = service
        self._secret = os.urandom(32)  # salts for unknown users, stable while running
        self._keys: dict[tuple[str, str], tuple[_Keys, Principal]] = {}

    def forget(self) -> None:
        self._keys.clear()

    def exchange(self, mechanism: str, remote_address: str | None = None) -> ScramExchange:
        if mechanism not in HASHES:
            raise SecurityError(f"unknown SCRAM mechanism {mechanism}")
        return ScramExchange(self, mechanism, remote_address)

    def keys(self, username: str, mechanism: str) -> tuple[_Keys, Principal] | None:
        """Blocking (PBKDF2): call in a worker thread."""
        cached = self._keys.get((username, mechanism))
        if cached is not None:
            return cached
        authenticator = self.service.authenticator
        lookup = getattr(authenticator, "lookup", None)
        user = lookup(username) if lookup is not None else None
        if user is None or user.password.kind != "plain":
            return None
        keys = derive(user.password.value, os.urandom(16), HASHES[mechanism])
        found = (keys, Principal(user.name, user.groups))
        self._keys[(username, mechanism)] = found
        return found

    def decoy(self, username: str, mechanism: str) -> _Keys:
        salt = hmac.new(self._secret, username.encode("utf-8"), "sha256").digest()[:16]
        return _Keys(salt, os.urandom(64), os.urandom(64))


class ScramExchange:
    def __init__(self, provider: ScramProvider, mechanism: str, remote: str | None) -> None:
        self.provider = provider
        self.mechanism = mechanism
        self.hash = HASHES[mechanism]
        self.remote = remote
        self.username: str | None = None
        self._first_bare = ""
        self._server_first = ""
        self._gs2 = ""
        self._nonce = ""
        self._keys: _Keys | None = None
        self._principal: Principal | None = None

    async def first(self, client_first: bytes) -> bytes:
        """client-first-message -> server-first-message."""
        try:
            text = client_first.decode("utf-8")
            flag, authzid, bare = text.split(",", 2)
            if flag not in ("n", "y"):
                raise ValueError("channel binding is not supported")
            attrs = _attributes(bare)
            name = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            cnonce = attrs["r"]
        except (ValueError, KeyError, UnicodeDecodeError) as exc:
            self._fail(None, f"malformed client-first message: {exc}")
            raise SecurityError(_REFUSED) from None
        self.username = name
        self._gs2 = f"{flag},{authzid},"
        self._first_bare = bare
        service = self.provider.service
        await service.throttle_wait(self.remote)
        found = await asyncio.to_thread(self.provider.keys, name, self.mechanism)
        if found is None:
            self._keys = self.provider.decoy(name, self.mechanism)
        else:
            self._keys, self._principal = found
        self._nonce = cnonce + base64.b64encode(os.urandom(18)).decode("ascii")
        salt = base64.b64encode(self._keys.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={ITERATIONS}"
        return self._server_first.encode("ascii")

    async def final(self, client_final: bytes) -> tuple[bytes, ScramProof]:
        """client-final-message -> (server-final-message, proof for broker.connect)."""
        keys = self._keys
        if keys is None:
            raise SecurityError(_REFUSED)
        try:
            text = client_final.decode("utf-8")
            without_proof, _, proof_part = text.rpartition(",p=")
            attrs = _attributes(without_proof)
            proof = base64.b64decode(proof_part, validate=True)
            binding = base64.b64decode(attrs["c"]).decode("utf-8")
        except (ValueError, KeyError, UnicodeDecodeError) as exc:
            self._fail(self.username, f"malformed client-final message: {exc}")
            raise SecurityError(_REFUSED) from None
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(keys.stored_key, auth_message, self.hash).digest()
        ok = (attrs.get("r") == self._nonce and binding == self._gs2
              and len(proof) == len(signature))
        if ok:
            client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
            ok = hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), keys.stored_key)
        if not ok or self._principal is None or self.username is None:
            reason = "unknown user or no SCRAM password" if self._principal is None \
                else "wrong proof"
            self._fail(self.username, reason)
            raise SecurityError(_REFUSED)
        server_signature = hmac.new(keys.server_key, auth_message, self.hash).digest()
        result = ScramProof(self.username, self._principal, self.mechanism, self.provider)
        self.provider.service.throttle.succeeded(host_of(self.remote))
        final = "v=" + base64.b64encode(server_signature).decode("ascii")
        return final.encode("ascii"), result

    def _fail(self, user: str | None, reason: str) -> None:
        service = self.provider.service
        host = host_of(self.remote)
        service.throttle.failed(host)
        service.audit.login_failed(user, "amqp", self.remote, f"{self.mechanism}: {reason}",
                                   service.throttle.failures(host) if host else 0)

