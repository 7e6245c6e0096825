"""STOMP 1.2 frame building and scanning for the bench's lean client.

Why not stomp.py: it builds a dict of headers and a frame object per message
and runs a listener thread; that costs ~30 µs per received message, more than
many brokers spend.  Here SEND frames are pre-built templates (only the body's
sequence/timestamp and, on every Nth frame, a fixed-width receipt id change),
and MESSAGE frames are located with ``bytes.find`` on ``content-length``
without decoding the other headers.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import NamedTuple

from . import payload

NUL = b"\x00"
RECEIPT_DIGITS = 10  # receipt ids are "r" + 10 digits so templates keep fixed offsets

_ESCAPES = {"\\": "\\\\", "\r": "\\r", "\n": "\\n", ":": "\\c"}
_UNESCAPES = {"\\\\": "\\", "\\r": "\r", "\\n": "\n", "\\c": ":"}


class StompError(RuntimeError):
    """An ERROR frame from the broker, or a malformed frame."""


def escape(value: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in value)


def unescape(value: str) -> str:
    if "\\" not in value:
        return value
    out = []
    i = 0
    while i < len(value):
        pair = value[i:i + 2]
        if pair in _UNESCAPES:
            out.append(_UNESCAPES[pair])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def build_frame(command: str, headers: Mapping[str, str | int] | None = None,
                body: bytes = b"", escape_headers: bool = True) -> bytes:
    """One frame; CONNECT must not escape its headers (STOMP 1.2 section "Value Encoding")."""
    lines = [command]
    for k, v in (headers or {}).items():
        v = str(v)
        lines.append(f"{escape(k)}:{escape(v)}" if escape_headers else f"{k}:{v}")
    return ("\n".join(lines) + "\n\n").encode() + body + NUL


def connect_frame(host: str, login: str | None, passcode: str | None) -> bytes:
    headers: dict[str, str | int] = {"accept-version": "1.2", "host": host, "heart-beat": "0,0"}
    if login is not None:
        headers["login"] = login
        headers["passcode"] = passcode or ""
    return build_frame("CONNECT", headers, escape_headers=False)


class Frame(NamedTuple):
    """A fully decoded frame (control path only)."""

    command: str
    headers: dict[str, str]
    body: bytes


def parse_frame(buf: bytes | bytearray, pos: int = 0) -> tuple[Frame | None, int]:
    """Decode the frame at ``pos``; ``(None, pos)`` if it is incomplete.

    Leading EOLs (heart-beats) are skipped.  Repeated headers keep the first
    value, as STOMP 1.2 requires.
    """
    n = len(buf)
    while pos < n and buf[pos] in (10, 13):
        pos += 1
    if pos >= n:
        return None, pos
    hdr_end = buf.find(b"\n\n", pos)
    crlf = buf.find(b"\r\n\r\n", pos)
    if crlf >= 0 and (hdr_end < 0 or crlf < hdr_end):
        hdr_end, sep = crlf, 4
    else:
        sep = 2
    if hdr_end < 0:
        return None, pos
    lines = buf[pos:hdr_end].decode().replace("\r\n", "\n").split("\n")
    command = lines[0]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if command not in ("CONNECT", "CONNECTED"):
            k, v = unescape(k), unescape(v)
        headers.setdefault(k, v)
    body_start = hdr_end + sep
    if "content-length" in headers:
        end = body_start + int(headers["content-length"])
        if end >= n:
            return None, pos
        if buf[end] != 0:
            raise StompError(f"{command} frame: no NUL after content-length body")
    else:
        end = buf.find(NUL, body_start)
        if end < 0:
            return None, pos
    return Frame(command, headers, bytes(buf[body_start:end])), end + 1


def error_text(frame: Frame) -> str:
    msg = frame.headers.get("message", "")
    body = frame.body.decode(errors="replace").strip()
    return f"{msg} {body}".strip()


class SendTemplate:
    """Pre-built SEND frames: ``plain`` and ``with_receipt`` differ only in a receipt header.

    The body's seq/ts sit at ``seq_offset`` in either template; the receipt
    id digits at ``receipt_offset`` in ``with_receipt``.
    """

    def __init__(self, destination: str, body: bytes, persistent: bool,
                 extra_headers: Mapping[str, str] | None = None):
        headers: dict[str, str | int] = {"destination": destination,
                                         "content-length": len(body)}
        if persistent:
            headers["persistent"] = "true"
        headers.update(extra_headers or {})
        self.plain = build_frame("SEND", headers, body)
        headers["receipt"] = "r" + "0" * RECEIPT_DIGITS
        self.with_receipt = build_frame("SEND", headers, body)
        body_at = len(self.with_receipt) - 1 - len(body)
        self.receipt_offset = self.with_receipt.rindex(b"\nreceipt:r", 0, body_at) + 10
        self.seq_offset_plain = len(self.plain) - 1 - len(body) + payload.SEQ_OFFSET
        self.seq_offset_receipt = body_at + payload.SEQ_OFFSET

    @staticmethod
    def receipt_id(n: int) -> bytes:
        return b"r%010d" % n


def receipt_number(receipt_id: str) -> int:
    """Inverse of :meth:`SendTemplate.receipt_id` (-1 for ids the bench did not issue)."""
    if len(receipt_id) == RECEIPT_DIGITS + 1 and receipt_id[0] == "r" and receipt_id[1:].isdigit():
        return int(receipt_id[1:])
    return -1


_SEQ_TS = payload.SEQ_TS


class MessageScan(NamedTuple):
    """Where one MESSAGE frame's pieces are in the receive buffer."""

    start: int
    headers_end: int
    body_start: int
    body_end: int
    next_pos: int


def scan_message(buf: bytes | bytearray, pos: int) -> MessageScan | None:
    """Locate the next frame (any command) without decoding headers.

    Returns None when the frame is incomplete.  This is the reference version
    of the loop the client inlines; tests pin both to the same behaviour.
    """
    n = len(buf)
    while pos < n and buf[pos] in (10, 13):
        pos += 1
    hdr_end = buf.find(b"\n\n", pos)
    if hdr_end < 0:
        return None
    cl = buf.find(b"\ncontent-length:", pos, hdr_end)
    body = hdr_end + 2
    if cl >= 0:
        eol = buf.find(b"\n", cl + 16, hdr_end + 1)
        end = body + int(buf[cl + 16:eol])
        if end >= n:
            return None
    else:
        end = buf.find(NUL, body)
        if end < 0:
            return None
    return MessageScan(pos, hdr_end, body, end, end + 1)


def header_value(buf: bytes | bytearray, start: int, headers_end: int,
                 name: bytes) -> bytes | None:
    """Raw value of header ``name`` in one frame's header block (first occurrence)."""
    key = b"\n" + name + b":"
    i = buf.find(key, start, headers_end)
    if i < 0:
        return None
    j = buf.find(b"\n", i + len(key), headers_end + 1)
    return bytes(buf[i + len(key):j])


def unpack_seq_ts(buf: bytes, offset: int) -> tuple[int, int]:
    return struct.unpack_from(">Qq", buf, offset)  # type: ignore[return-value]
