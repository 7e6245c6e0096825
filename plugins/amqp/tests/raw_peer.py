"""A raw AMQP peer, for what real clients will not do (shared by the connection and
transaction tests)."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from relaymq_amqp.encode import frame, performative
from relaymq_amqp.sasl import AMQP_HEADER
from relaymq_amqp.scanner import decode
from relaymq_amqp.types import UInt


class RawPeer:
    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_frame(self) -> tuple[int, Any]:
        """(frame type, decoded body or None for an empty frame)."""
        size, doff, ftype = struct.unpack(">IBB", self.read_exact(6))
        rest = self.read_exact(size - 6)
        body = rest[doff * 4 - 6:]
        return ftype, decode(body)[0] if body else None

    def frames_until_closed(self, timeout: float = 5) -> list[Any]:
        self.sock.settimeout(timeout)
        out = []
        try:
            while True:
                out.append(self.read_frame()[1])
        except (EOFError, ConnectionResetError):
            return out

    def empty_frames(self, n: int, timeout: float) -> int:
        """Read until `n` empty (heartbeat) frames came; raise if the broker closes
        the connection, sends anything else, or `timeout` seconds pass first."""
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        seen = 0
        while seen < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"{seen} of {n} heartbeats within {timeout} s")
            ftype, body = self.read_frame()
            assert body is None, f"expected only heartbeats, got {body!r}"
            seen += 1
        return seen

    def closed_within(self, seconds: float) -> bool:
        self.sock.settimeout(seconds)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True

    def open_amqp(self, idle_timeout: int | None = None) -> None:
        """AMQP header (no SASL) and an open; reads the broker's header and open."""
        self.send(AMQP_HEADER)
        idle = None if idle_timeout is None else UInt(idle_timeout)  # milliseconds: a uint
        self.send(frame(performative(0x10, ["raw-peer", None, None, None, idle])))
        assert self.read_exact(8) == AMQP_HEADER
        _, body = self.read_frame()
        assert body.descriptor == 0x10


def close_condition(frames: list[Any]) -> Any:
    for f in frames:
        if f is not None and f.descriptor == 0x18:  # close
            error = f.value[0] if f.value else None  # error: [condition, description, info]
            return error.value[0] if error is not None else None
    return None
