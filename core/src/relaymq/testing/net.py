"""Loopback ports for tests: free ones to configure, and waiting for a listener."""

from __future__ import annotations

import random
import socket
import subprocess
from collections.abc import Callable

from relaymq.testing.waits import wait_until


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` right now (for a broker configured with a fixed port)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_port_below_ephemeral(low: int = 20000, high: int = 32000) -> int:
    """A free port below the ephemeral range, so no client's local port (a client
    retrying a dead port can even connect to itself) takes it before a restart."""
    for _ in range(200):
        port = random.randint(low, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between {low} and {high}")


def is_listening(port: int, host: str = "127.0.0.1") -> bool:
    try:
        socket.create_connection((host, port), 0.2).close()
        return True
    except OSError:
        return False


def wait_listening(port: int, proc: subprocess.Popen | None = None, timeout: float = 30.0,
                   output: Callable[[], str] | None = None, host: str = "127.0.0.1") -> None:
    """Wait until something accepts connections on `port`; AssertionError on timeout,
    or at once when `proc` (the broker process) exits first, with its `output()`."""

    def up() -> bool:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the broker exited with {proc.returncode} before listening on "
                                 f"{port}: {output() if output else ''}")
        return is_listening(port, host)

    wait_until(up, f"a listener on {host}:{port}", timeout)
