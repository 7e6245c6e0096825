"""SASL for AMQP 1.0, in Python, in front of proton's AMQP layer.

Proton's built-in SASL cannot check a PLAIN password on the server side, and
its Cyrus integration is a build-time option we do not want to depend on. So
the broker answers the SASL layer itself: it reads the SASL protocol header
and the `sasl-init` frame, asks the kernel (``broker.connect`` -> the
``relaymq_authenticate`` hook) and sends `sasl-outcome`. Everything after the
outcome -- the AMQP protocol header and frames -- goes to proton untouched.

Both sides are sans-IO: `feed(bytes)` returns what to do; the caller owns the
socket. Mechanisms: PLAIN and ANONYMOUS (RFC 4616, RFC 4505), and EXTERNAL
(RFC 4422 appendix A: the TLS client certificate is the credential), offered
when the connection presented a verified client certificate; SCRAM-SHA-256 and
SCRAM-SHA-512 (RFC 5802/7677: `sasl-challenge` and `sasl-response`, the server's
signature in the outcome's additional-data) when the broker's authentication
plugin provides them (``broker.extensions["sasl-scram"]``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from relaymq_amqp.encode import frame, performative, symbol_array
from relaymq_amqp.scanner import DecodeError, decode
from relaymq_amqp.types import Described, Symbol, UByte

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
TLS_HEADER = b"AMQP\x02\x01\x00\x00"

SASL_MECHANISMS = 0x40
SASL_INIT = 0x41
SASL_CHALLENGE = 0x42
SASL_RESPONSE = 0x43
SASL_OUTCOME = 0x44

OK, AUTH, SYS, SYS_PERM, SYS_TEMP = 0, 1, 2, 3, 4
#: challenge-response mechanisms offered when the broker's authentication provides them
SCRAM = ("SCRAM-SHA-512", "SCRAM-SHA-256")

#: SASL frames are tiny; a larger one is an attack or a confused peer.
MAX_SASL_FRAME = 65536


class SaslError(Exception):
    """The peer broke the SASL exchange; the connection is closed without an outcome."""


@dataclass(slots=True)
class Credentials:
    mechanism: str
    username: str | None = None
    password: str | None = None
    authzid: str | None = None
    hostname: str | None = None
    #: the initial response (sasl-init) or a sasl-response, for challenge mechanisms
    response: bytes | None = None


def parse_plain(response: bytes) -> tuple[str | None, str, str]:
    """RFC 4616: ``authzid NUL authcid NUL passwd``."""
    parts = response.split(b"\x00")
    if len(parts) != 3:
        raise SaslError("a PLAIN response has three NUL-separated fields")
    authz, user, password = (p.decode("utf-8") for p in parts)
    return authz or None, user, password


def _frame(buf: bytearray) -> tuple[int, list[object]] | None:
    """Take the first complete SASL frame (after any empty ones) off the front of
    `buf` as (code, fields), or None when it has not all come yet. What follows it
    stays in `buf`: a client that pipelines sends its AMQP header right after its
    sasl-init, before the outcome, and those bytes are the AMQP layer's."""
    while len(buf) >= 8:
        if buf.startswith(b"AMQP"):
            raise SaslError("expected a SASL frame, got an AMQP protocol header: the client must "
                            "send sasl-init before it")
        size, doff, ftype = struct.unpack_from(">IBB", buf, 0)
        if size < 8 or size > MAX_SASL_FRAME or doff < 2:
            raise SaslError(f"bad SASL frame (size {size}, data offset {doff})")
        if ftype != 1:
            raise SaslError(f"expected a SASL frame, got frame type {ftype}")
        if len(buf) < size:
            return None
        body = bytes(buf[doff * 4:size])
        del buf[:size]
        if not body:  # an empty frame (heartbeat) is allowed and ignored
            continue
        try:
            value, _ = decode(body)
        except DecodeError as exc:
            raise SaslError(f"undecodable SASL frame: {exc}") from None
        if not isinstance(value, Described) or not isinstance(value.value, list):
            raise SaslError("a SASL frame must hold a described list")
        return (int(value.descriptor) if isinstance(value.descriptor, int) else -1), value.value
    return None


class SaslServer:
    """The listening side: header, mechanisms, init, outcome.

    ``feed`` returns ``(to_send, credentials_or_None, leftover)``. When
    credentials come back the caller authenticates and calls ``outcome(ok)``;
    bytes that arrived after the init (a pipelining client) are returned as
    leftover and belong to the AMQP layer once the outcome was positive.
    """

    def __init__(self, mechanisms: tuple[str, ...] = ("PLAIN", "ANONYMOUS")) -> None:
        self.mechanisms = mechanisms
        self._buf = bytearray()
        self._state = "header"
        self.credentials: Credentials | None = None

    @property
    def done(self) -> bool:
        return self._state == "done"

    def feed(self, data: bytes) -> tuple[bytes, Credentials | None, bytes]:
        self._buf += data
        out = b""
        if self._state == "header":
            if len(self._buf) < 8:
                if not SASL_HEADER.startswith(bytes(self._buf)):
                    raise SaslError("not an AMQP SASL protocol header")
                return b"", None, b""
            if bytes(self._buf[:8]) != SASL_HEADER:
                raise SaslError("not an AMQP SASL protocol header")
            del self._buf[:8]
            out = SASL_HEADER + frame(performative(SASL_MECHANISMS, [
                symbol_array(list(self.mechanisms))]), 1)
            self._state = "init"
        if self._state not in ("init", "response"):
            raise SaslError(f"unexpected bytes in SASL state {self._state}")
        got = _frame(self._buf)
        if got is None:
            return out, None, b""
        code, fields = got
        if self._state == "response":
            if code != SASL_RESPONSE or not fields or not isinstance(fields[0], (bytes, bytearray)):
                raise SaslError(f"expected sasl-response, got performative 0x{code:x}")
            assert self.credentials is not None
            self.credentials.response = bytes(fields[0])
        else:
            if code != SASL_INIT:
                raise SaslError(f"expected sasl-init, got performative 0x{code:x}")
            self.credentials = self._credentials(fields)
        self._state = "waiting"
        leftover = bytes(self._buf)  # a pipelining client's AMQP header, open, ...
        self._buf.clear()
        return out, self.credentials, leftover

    def _credentials(self, fields: list[object]) -> Credentials:
        fields = fields + [None] * (3 - len(fields))
        mech, response, hostname = fields[0], fields[1], fields[2]
        if not isinstance(mech, str):
            raise SaslError("sasl-init names no mechanism")
        creds = Credentials(str(mech), hostname=hostname if isinstance(hostname, str) else None)
        if isinstance(response, (bytes, bytearray)):
            creds.response = bytes(response)
        if mech == "PLAIN":
            if not isinstance(response, (bytes, bytearray)):
                raise SaslError("PLAIN needs an initial response")
            try:
                creds.authzid, creds.username, creds.password = parse_plain(bytes(response))
            except (SaslError, UnicodeDecodeError):
                creds.mechanism = "PLAIN?"  # malformed: refused by the caller
        return creds

    def challenge(self, data: bytes) -> bytes:
        """A sasl-challenge frame; the client's sasl-response comes back from `feed`."""
        self._state = "response"
        return frame(performative(SASL_CHALLENGE, [data]), 1)

    def outcome(self, ok: bool, code: int | None = None,
                additional: bytes | None = None) -> bytes:
        """The sasl-outcome frame; after a positive one the AMQP layer follows."""
        self._state = "done" if ok else "failed"
        fields: list[object] = [_ubyte(OK if ok else (code or AUTH))]
        if ok and additional is not None:
            fields.append(additional)
        return frame(performative(SASL_OUTCOME, fields), 1)


class SaslClient:
    """The connecting side (outgoing broker connections): PLAIN when a user name
    is given and offered, else ANONYMOUS."""

    def __init__(self, username: str | None = None, password: str | None = None,
                 hostname: str | None = None) -> None:
        self.username = username
        self.password = password
        self.hostname = hostname
        self._buf = bytearray()
        self._state = "header"
        self.mechanism: str | None = None

    def start(self) -> bytes:
        return SASL_HEADER

    def feed(self, data: bytes) -> tuple[bytes, bool | None, bytes]:
        """Returns (to_send, outcome (None until known), leftover AMQP bytes)."""
        self._buf += data
        out = b""
        if self._state == "header":
            if len(self._buf) < 8:
                return b"", None, b""
            if bytes(self._buf[:8]) != SASL_HEADER:
                raise SaslError(f"the server answered {bytes(self._buf[:8])!r}, not SASL")
            del self._buf[:8]
            self._state = "mechanisms"
        while (got := _frame(self._buf)) is not None:
            code, fields = got
            if self._state == "mechanisms" and code == SASL_MECHANISMS:
                first = fields[0] if fields else None
                offered = [first] if isinstance(first, str) else \
                    [str(m) for m in first] if isinstance(first, list) else []
                out += self._init(offered)
                self._state = "outcome"
            elif self._state == "outcome" and code == SASL_OUTCOME:
                ok = bool(fields) and fields[0] == OK
                self._state = "done" if ok else "failed"
                leftover = bytes(self._buf)
                self._buf.clear()
                return out, ok, leftover
            elif code == SASL_CHALLENGE:
                raise SaslError("the server sent a SASL challenge; PLAIN and ANONYMOUS have none")
            else:
                raise SaslError(f"unexpected SASL performative 0x{code:x}")
        return out, None, b""

    def _init(self, offered: list[str]) -> bytes:
        if self.username is not None and "PLAIN" in offered:
            self.mechanism = "PLAIN"
            response = b"\x00" + self.username.encode() + b"\x00" + (self.password or "").encode()
        elif "ANONYMOUS" in offered:
            self.mechanism = "ANONYMOUS"
            response = b""
        else:
            raise SaslError(f"no common SASL mechanism; the server offers {offered}")
        return frame(performative(SASL_INIT, [Symbol(self.mechanism), response,
                                              self.hostname]), 1)


def _ubyte(v: int) -> UByte:
    return UByte(v)
