"""A sans-IO STOMP frame parser with limits.

Bytes go in (`FrameParser.feed`), complete frames come out. Nothing here knows
about sockets, sessions or the broker, so the codec is tested with plain bytes.

Why it is shaped this way:

* The common case is a read that holds whole frames. `feed` then works on the
  received `bytes` directly and only keeps (in a bytearray) the tail of a frame
  that is not complete yet; nothing is copied twice.
* A frame's headers end at the first empty line (`\\n\\n`, or `\\n\\r\\n` from a
  1.2 client using CRLF). Headers are decoded once and split into a dict in one
  C-level call; a repeated header keeps its first value (STOMP 1.2).
* Limits protect the broker from one client: the header section (command
  length, header count, header line length) is checked while it is still
  incomplete, incrementally, so a client cannot make the parser rescan or
  buffer without bound; a body is bounded by `max_data_length` and a whole
  frame by `max_frame_size`, both checked before its bytes are buffered.
* Heart-beats (EOLs between frames) are skipped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import FrameError
from .frames import Frame

_NUL = 0


@dataclass(slots=True)
class Limits:
    """Wire-format limits (ActiveMQ's StompWireFormat defaults)."""

    max_command_length: int = 1024
    max_header_length: int = 10 * 1024  # one `name:value` line
    max_headers: int = 1000
    max_data_length: int = 100 * 1024 * 1024  # body bytes
    max_frame_size: int = 100 * 1024 * 1024 + 1024 * 1024  # header section + body

    @property
    def max_header_section(self) -> int:
        """Bytes a header section may take before its terminating empty line."""
        return min(self.max_frame_size,
                   self.max_command_length + self.max_headers * (self.max_header_length + 1) + 2)


_HEADERS, _BODY_LENGTH, _BODY_NUL = 0, 1, 2


class FrameParser:
    """Cuts a byte stream into `Frame`s.

    `feed(data)` returns the frames completed by `data`. When the stream is
    broken it raises `FrameError`; the frames completed before the error are
    in `error_frames` so the caller can still act on them in order.

    An incomplete frame is kept in a bytearray and the parser remembers what it
    is waiting for (the end of the headers, `content-length` bytes, or a NUL);
    a read that cannot complete it is appended without being scanned again, and
    the frame is turned into `bytes` once, when it can complete.
    """

    __slots__ = ("limits", "commands", "_buf", "_state", "_hdr_scan", "_lines", "_line_start",
                 "_last_text", "_last_command", "_last_headers",
                 "_need", "heartbeats", "error_frames", "broken")

    def __init__(self, limits: Limits | None = None,
                 commands: frozenset[str] | None = None) -> None:
        self.limits = limits or Limits()
        #: when given, any other command is refused as soon as its line is complete
        #: (an HTTP request or a TLS hello must not wait for a NUL that never comes)
        self.commands = commands
        self._buf = bytearray()  # bytes of an incomplete frame (starts at its first byte)
        self._state = _HEADERS  # what the incomplete frame waits for
        self._hdr_scan = 0  # where to continue looking for the end of the headers
        self._lines = 0  # newlines seen in an incomplete header section
        self._line_start = 0  # start of the current (incomplete) header line
        self._need = 0  # bytes the frame needs in total (known from content-length)
        self.heartbeats = 0
        #: the previous frame's header block, as parsed (a producer repeats it)
        self._last_text: str | None = None
        self._last_command = ""
        self._last_headers: dict[str, str] = {}
        self.error_frames: list[Frame] = []
        self.broken = False

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        if self.broken:
            return []
        frames: list[Frame] = []
        try:
            buf = self._buf
            if buf:
                buf += data
                if not self._can_complete(buf, data):
                    return frames
                data = bytes(buf)
                self._buf = bytearray()
            pos = self._parse(data, frames)
        except FrameError:
            self.broken = True
            self._buf = bytearray()
            self.error_frames = frames
            raise
        if pos < len(data):
            self._buf = bytearray(memoryview(data)[pos:])
        return frames

    def _can_complete(self, buf: bytearray, data: bytes) -> bool:
        """Whether the buffered frame may be complete now; enforces limits meanwhile."""
        state = self._state
        if state == _BODY_LENGTH:
            return len(buf) >= self._need
        limits = self.limits
        if state == _BODY_NUL:
            if b"\x00" in data:
                return True
            if len(buf) > limits.max_frame_size or len(buf) - self._hdr_scan > limits.max_data_length:
                raise FrameError("frame body too large",
                                 f"no NUL within {limits.max_data_length} bytes")
            return False
        scan = self._hdr_scan
        if buf.find(b"\n\n", scan) >= 0 or buf.find(b"\n\r\n", scan) >= 0:
            return True
        self._check_partial_headers(buf, 0, scan, len(buf))
        return False

    # -- the parser proper ----------------------------------------------------------
    def _parse(self, buf: bytes, frames: list[Frame]) -> int:
        limits = self.limits
        commands = self.commands
        max_header_length = limits.max_header_length
        max_lines = limits.max_headers + 1
        max_data = limits.max_data_length
        n = len(buf)
        pos = 0
        while pos < n:
            c = buf[pos]
            if c == 10 or c == 13:  # EOL: a heart-beat or the padding after a NUL
                pos += 1
                if c == 10:
                    self.heartbeats += 1
                continue
            # -- header section: ends at the first empty line ----------------------
            scan = pos + self._hdr_scan
            end = buf.find(b"\n\n", scan)
            text = None
            if end >= 0:
                body_start = end + 2
                try:
                    text = buf[pos:end].decode()
                except UnicodeDecodeError as exc:
                    raise FrameError("garbage: a frame header is not UTF-8", str(exc)) from None
                if "\r" in text:
                    text = None  # maybe CRLF line ends: look again below
            raw = text is None  # CR in the headers: kept away from the fast paths
            if text is None:
                crlf = buf.find(b"\n\r\n", scan, end + 1 if end >= 0 else n)
                if crlf >= 0 and (end < 0 or crlf < end):
                    end, body_start = crlf, crlf + 3
                elif end < 0:
                    self._state = _HEADERS
                    self._check_partial_headers(buf, pos, scan, n)
                    return pos
                try:
                    text = buf[pos:end].decode()
                except UnicodeDecodeError as exc:
                    raise FrameError("garbage: a frame header is not UTF-8", str(exc)) from None
                if "\r" in text:  # CRLF line ends (STOMP 1.2)
                    text = text.replace("\r\n", "\n")
                    if text.endswith("\r"):
                        text = text[:-1]
            if self._hdr_scan:
                self._hdr_scan = 0
            if end - pos > max_header_length:
                self._check_header_block(text, end - pos)
            if text == self._last_text:
                # A producer repeating the header block of its previous frame (the
                # usual stream of SENDs): same command, same headers, same checks.
                command = self._last_command
                headers = self._last_headers.copy()
            else:
                lines = text.split("\n")
                if len(lines) > max_lines:
                    raise FrameError("too many headers",
                                     f"{len(lines) - 1}; the limit is {limits.max_headers}")
                command = lines[0]
                if commands is not None and command not in commands:
                    if len(command) > limits.max_command_length:
                        raise FrameError("garbage: command too long", f"{len(command)} characters")
                    raise _unknown(command)
                if len(lines) > 1:
                    try:
                        headers = dict([ln.split(":", 1) for ln in lines[:0:-1]])  # first one wins
                    except ValueError:
                        bad = next(ln for ln in lines[1:] if ":" not in ln)
                        raise FrameError("garbage: a header line has no ':'",
                                         repr(bad[:80])) from None
                else:
                    headers = {}
                self._last_text, self._last_command = text, command
                self._last_headers = headers.copy()  # the frame's own dict is consumed
            # -- body ---------------------------------------------------------------
            cl = headers.get("content-length")
            if cl is not None:
                if cl.isdigit() and cl.isascii():
                    length = int(cl)
                else:
                    length = _content_length(cl)
                if length > max_data:
                    raise FrameError("frame body too large",
                                     f"content-length {length}; the limit is {limits.max_data_length}")
                stop = body_start + length
                if stop - pos > limits.max_frame_size:
                    raise FrameError("frame too large", f"the limit is {limits.max_frame_size} bytes")
                if stop >= n:
                    self._state = _BODY_LENGTH
                    self._need = stop + 1 - pos
                    self._hdr_scan = end - pos  # the header end is found at once next time
                    return pos
                if buf[stop] != 0:
                    raise FrameError("bad content-length: the frame does not end with NUL after "
                                     f"{length} body bytes")
            else:
                stop = buf.find(b"\x00", body_start)
                if stop < 0:
                    if n - body_start > limits.max_data_length or n - pos > limits.max_frame_size:
                        raise FrameError("frame body too large",
                                         f"no NUL within {limits.max_data_length} bytes")
                    self._state = _BODY_NUL
                    self._hdr_scan = end - pos
                    return pos
                # a whole frame can arrive in one read: its size is checked here too
                if stop - body_start > max_data:
                    raise FrameError("frame body too large",
                                     f"{stop - body_start} bytes; the limit is "
                                     f"{limits.max_data_length}")
                if stop - pos > limits.max_frame_size:
                    raise FrameError("frame too large",
                                     f"the limit is {limits.max_frame_size} bytes")
            frames.append(Frame(command, headers, buf[body_start:stop], raw or "\\" in text,
                                stop + 1 - pos))
            pos = stop + 1
        self._state = _HEADERS
        return pos

    def _check_header_block(self, text: str, hsize: int) -> None:
        limits = self.limits
        if hsize > limits.max_header_section:
            raise FrameError("frame header section too large",
                             f"{hsize} bytes; the limit is {limits.max_header_section}")
        lines = text.split("\n")
        if len(lines[0]) > limits.max_command_length:
            raise FrameError("garbage: command too long", f"{len(lines[0])} characters")
        if len(lines) - 1 > limits.max_headers:
            raise FrameError("too many headers",
                             f"{len(lines) - 1}; the limit is {limits.max_headers}")
        longest = max(map(len, lines))
        if longest > limits.max_header_length:
            raise FrameError("header too long",
                             f"{longest} characters; the limit is {limits.max_header_length}")

    def _check_partial_headers(self, buf: bytes | bytearray, pos: int, scan: int, n: int) -> None:
        """Bound an incomplete header section without rescanning what was checked."""
        limits = self.limits
        if scan == pos:  # a fresh frame: nothing of it was counted yet
            self._lines = self._line_start = 0
        if n - pos > limits.max_header_section:
            raise FrameError("frame header section too large",
                             f"no end of headers within {limits.max_header_section} bytes")
        # Only bytes after `scan` are new; the last byte may start "\n\n", so keep it.
        lines = self._lines + buf.count(b"\n", scan, n)
        last_nl = buf.rfind(b"\n", scan, n)
        line_start = last_nl + 1 - pos if last_nl >= 0 else self._line_start
        if lines > limits.max_headers + 1:
            raise FrameError("too many headers", f"the limit is {limits.max_headers}")
        if lines and self.commands is not None and self._lines == 0:
            eol = buf.find(b"\n", pos, n)
            command = bytes(buf[pos:eol]).rstrip(b"\r").decode("utf-8", "replace")
            if command not in self.commands:
                raise _unknown(command)
        if lines == 0:
            if n - pos > limits.max_command_length:
                raise FrameError("garbage: command too long",
                                 f"no end of line within {limits.max_command_length} bytes")
        elif n - pos - line_start > limits.max_header_length:
            raise FrameError("header too long",
                             f"a header line exceeds {limits.max_header_length} bytes")
        # resume one byte early so a "\n\n" (or "\n\r\n") split across reads is found
        resume = max(n - 2, pos)
        if resume > scan:
            self._lines = lines - buf.count(b"\n", resume, n)
        else:
            resume = scan
            self._lines = lines - buf.count(b"\n", scan, n)
        self._hdr_scan = resume - pos
        self._line_start = line_start
        self._need = 0


def _content_length(text: str) -> int:
    t = text.strip()
    if not t.isdigit() or not t.isascii():
        raise FrameError("bad content-length", f"content-length:{text[:40]!r} is not a length")
    return int(t)


def _unknown(command: str) -> FrameError:
    return FrameError(f"Unknown STOMP action: {command[:40]}",
                      "a frame starts with a STOMP command such as CONNECT, SEND or SUBSCRIBE")
