"""A blocking STOMP 1.2 client for tests that drive a real broker process:
frames out, frames in, nothing hidden (no heart-beats, no reconnects).

Tests of other plugins use it where a stomp.py client would hide what they check
(the exact RECEIPT or ERROR a frame gets, or a broker killed mid-frame)::

    from relaymq_stomp.testing import BlockingStomp

    c = BlockingStomp(port)
    cmd, headers, body = c.send("/queue/Q", b"hello")   # waits for RECEIPT or ERROR
"""

from __future__ import annotations

import socket


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

    def receive_all(self, dest: str, timeout: float = 1.5, **headers: str) -> list[bytes]:
        """Subscribe with auto ack and collect bodies until `timeout` s pass quietly."""
        self.frame("SUBSCRIBE", {"destination": dest, "id": "1", "ack": "auto", **headers})
        self.sock.settimeout(timeout)
        out = []
        try:
            while True:
                cmd, _, body = self.read()
                if cmd == "MESSAGE":
                    out.append(body)
        except TimeoutError:
            pass
        finally:
            self.sock.settimeout(self.timeout)
        return out

    def close(self) -> None:
        self.sock.close()
