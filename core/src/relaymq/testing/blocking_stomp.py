"""A blocking STOMP 1.2 client for tests that drive a real broker process:
frames out, frames in, nothing hidden (no heart-beats, no reconnects). A plain
socket, so core needs no STOMP library and no plugin for it.

Tests use it where a stomp.py client would hide what they check (the exact
RECEIPT or ERROR a frame gets, or a broker killed mid-frame)::

    c = BlockingStomp(port)
    cmd, headers, body = c.send("/queue/Q", b"hello")   # waits for RECEIPT or ERROR
    everything = drain_queue(port, "Q")                 # what Q holds, consumed

Reading "everything" never waits for quiet: a marker goes in behind what the
queue holds and the bodies before it come back.
"""

from __future__ import annotations

import socket
import uuid


class BlockingStomp:
    """One STOMP 1.2 connection over a plain socket; CONNECT happens in the constructor."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0,
                 **headers: str) -> None:
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout)
        self.buf = b""
        self.frame("CONNECT", {"accept-version": "1.2", "host": "localhost", **headers})
        cmd, head, _ = self.read()
        if cmd != "CONNECTED":
            raise ConnectionError(f"CONNECT answered with {cmd} {head}")

    def frame(self, command: str, headers: dict[str, str], body: bytes = b"") -> None:
        head = "".join(f"{k}:{v}\n" for k, v in headers.items())
        self.sock.sendall(f"{command}\n{head}\n".encode() + body + b"\0")

    def read(self) -> tuple[str, dict[str, str], bytes]:
        """The next frame as (command, headers, body); headers are not unescaped."""
        while True:
            self.buf = self.buf.lstrip(b"\r\n")
            end = self.buf.find(b"\0")
            if end >= 0:
                raw, self.buf = self.buf[:end], self.buf[end + 1:]
                head, _, body = raw.partition(b"\n\n")
                lines = head.decode().split("\n")
                headers = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
                return lines[0], headers, body
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.buf += data

    def send(self, dest: str, body: bytes, **headers: str) -> tuple[str, dict[str, str], bytes]:
        """A persistent SEND that waits for its RECEIPT (or the ERROR)."""
        self.frame("SEND", {"destination": dest, "persistent": "true", "receipt": "r", **headers},
                   body)
        return self.read()

    def receive_all(self, dest: str, timeout: float = 120.0, **headers: str) -> list[bytes]:
        """Subscribe to `dest` (auto ack, `headers` added), then SEND a marker to it and
        return the bodies that come before the marker: everything `dest` held, and what
        was sent to it before the marker. AssertionError on an ERROR frame, or when the
        marker does not come within `timeout` s."""
        marker = f"end-of-drain-{uuid.uuid4()}".encode()
        self.frame("SUBSCRIBE", {"destination": dest, "id": "drain", "ack": "auto", **headers})
        self.frame("SEND", {"destination": dest, "receipt": "drain-marker"}, marker)
        self.sock.settimeout(timeout)
        out: list[bytes] = []
        try:
            while True:
                cmd, head, body = self.read()
                if cmd == "MESSAGE":
                    if body == marker:
                        return out
                    out.append(body)
                elif cmd == "ERROR":
                    raise AssertionError(f"ERROR while draining {dest}: {head} {body[:200]!r}")
        except TimeoutError:
            raise AssertionError(f"the marker sent to {dest} did not come back within "
                                 f"{timeout:g} s; {len(out)} messages before it") from None
        finally:
            self.sock.settimeout(self.timeout)

    def close(self) -> None:
        self.sock.close()


def drain_queue(port: int, queue: str, timeout: float = 120.0) -> list[str]:
    """Every message queue `queue` (its name) holds, consumed in order with auto ack,
    as text: a duplicate is there twice however late it would have come."""
    c = BlockingStomp(port, timeout=60)
    try:
        return [b.decode() for b in c.receive_all(f"/queue/{queue}", timeout)]
    finally:
        c.close()
