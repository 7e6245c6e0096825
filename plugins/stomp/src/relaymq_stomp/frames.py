"""STOMP frames, commands and header escaping (STOMP 1.0, 1.1, 1.2).

A `Frame` is what the parser produces and what handlers read. Header values
arrive *escaped* (the parser does not know the session's version yet when it
cuts frames that were pipelined behind CONNECT); `Frame.escaped` says whether
any backslash occurred, so the common frame with none is never rescanned.
"""

from __future__ import annotations

from typing import Final

from .errors import ProtocolError

V10, V11, V12 = "1.0", "1.1", "1.2"
SUPPORTED_VERSIONS = (V10, V11, V12)

# Client commands
CONNECT = "CONNECT"
STOMP = "STOMP"
SEND = "SEND"
SUBSCRIBE = "SUBSCRIBE"
UNSUBSCRIBE = "UNSUBSCRIBE"
BEGIN = "BEGIN"
COMMIT = "COMMIT"
ABORT = "ABORT"
ACK = "ACK"
NACK = "NACK"
DISCONNECT = "DISCONNECT"
CLIENT_COMMANDS = frozenset(
    {CONNECT, STOMP, SEND, SUBSCRIBE, UNSUBSCRIBE, BEGIN, COMMIT, ABORT, ACK, NACK, DISCONNECT}
)
# Server commands
CONNECTED: Final = "CONNECTED"
MESSAGE = "MESSAGE"
RECEIPT = "RECEIPT"
ERROR = "ERROR"


class Frame:
    """One STOMP frame. `headers` keeps the first occurrence of a repeated header
    (STOMP 1.2: "only the first header entry should be used")."""

    __slots__ = ("command", "headers", "body", "escaped", "size")

    def __init__(self, command: str, headers: dict[str, str], body: bytes = b"",
                 escaped: bool = False, size: int = 0) -> None:
        self.command = command
        self.headers = headers
        self.body = body
        #: a backslash (or a CR) occurred in the header block: unescape per version
        #: before use; False promises names and values hold no backslash, CR or LF
        self.escaped = escaped
        #: bytes the frame occupied on the wire
        self.size = size

    def __repr__(self) -> str:
        return f"Frame({self.command}, {self.headers!r}, body={self.body[:40]!r})"


# -- escaping -------------------------------------------------------------------------

_UNESCAPE_11: Final = {"n": "\n", "c": ":", "\\": "\\"}
_UNESCAPE_12: Final = {"n": "\n", "c": ":", "\\": "\\", "r": "\r"}
_ESCAPE_11: Final = str.maketrans({"\\": "\\\\", "\n": "\\n", ":": "\\c"})
_ESCAPE_12: Final = str.maketrans({"\\": "\\\\", "\n": "\\n", ":": "\\c", "\r": "\\r"})
#: characters that need escaping in 1.1+ header names and values
SPECIAL: Final = ("\\", "\n", ":", "\r")


def unescape(text: str, version: str) -> str:
    """Undo 1.1/1.2 header escaping; an undefined sequence is a fatal error (1.2 spec)."""
    if version == V10 or "\\" not in text:
        return text
    table = _UNESCAPE_12 if version == V12 else _UNESCAPE_11
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        j = text.find("\\", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        if j + 1 >= n or text[j + 1] not in table:
            seq = text[j:j + 2]
            raise ProtocolError(f"undefined escape sequence {seq!r} in a header",
                                f"STOMP {version} defines only \\n \\c \\\\"
                                + (" \\r" if version == V12 else ""))
        out.append(table[text[j + 1]])
        i = j + 2
    return "".join(out)


def unescape_headers(headers: dict[str, str], version: str) -> dict[str, str]:
    """Unescape names and values; the first occurrence of a name still wins."""
    out: dict[str, str] = {}
    for k, v in headers.items():
        k = unescape(k, version)
        if k not in out:
            out[k] = unescape(v, version)
    return out


def escape(text: str, version: str) -> str:
    """Escape a header name or value for `version` (1.0 has no escaping)."""
    if version == V10:
        return text.replace("\n", " ")  # 1.0 cannot carry a newline in a header at all
    for c in SPECIAL:
        if c in text:
            return text.translate(_ESCAPE_12 if version == V12 else _ESCAPE_11)
    return text


def needs_escape(text: str) -> bool:
    for c in SPECIAL:
        if c in text:
            return True
    return False


def encode_frame(command: str, headers: dict[str, str] | list[tuple[str, str]],
                 body: bytes = b"", version: str = V12, content_length: bool = True) -> bytes:
    """Encode a server frame. CONNECTED is never escaped (STOMP 1.1/1.2 rule)."""
    items = headers.items() if isinstance(headers, dict) else headers
    esc = version != V10 and command != CONNECTED
    lines = [command]
    for k, v in items:
        if esc:
            lines.append(f"{escape(k, version)}:{escape(v, version)}")
        else:
            lines.append(f"{k}:{v}")
    if body or content_length:
        lines.append(f"content-length:{len(body)}")
    lines.append("")
    lines.append("")
    return "\n".join(lines).encode() + body + b"\x00"
