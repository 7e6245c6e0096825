"""Loopback ports for tests: free ones to configure, and waiting for a listener."""

from __future__ import annotations

import os
import random
import socket
import subprocess
from collections.abc import Callable

from relaymq.testing.waits import wait_until

#: ports handed out to tests: below Linux's ephemeral range (32768-60999), so no
#: client connection's local port takes one between the pick and the broker's bind
LOW, HIGH = 20000, 32000
_next: dict[tuple[int, int], int] = {}


def worker_slice(low: int = LOW, high: int = HIGH) -> tuple[int, int]:
    """The part of [low, high] for this pytest-xdist worker (all of it outside xdist):
    workers never pick the same port for brokers they start at the same moment."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    span = (high - low + 1) // max(count, 1)
    return low + index * span, low + (index + 1) * span - 1


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", low: int = LOW, high: int = HIGH) -> int:
    """A port free on `host` right now (for a broker configured with a fixed port).

    Ports come from this worker's slice of [low, high] in turn, from a random start:
    a port handed out is not handed out again until the slice has gone round."""
    first, last = worker_slice(low, high)
    size = last - first + 1
    key = (first, last)
    offset = _next.get(key, random.randrange(size))
    for step in range(size):
        port = first + (offset + step) % size
        if _bindable(host, port):
            _next[key] = (offset + step + 1) % size
            return port
    raise RuntimeError(f"no free port between {first} and {last}")


def free_port_below_ephemeral(low: int = LOW, high: int = HIGH) -> int:
    """A free port below the ephemeral range, so no client's local port (a client
    retrying a dead port can even connect to itself) takes it before a restart."""
    return free_port("127.0.0.1", low, high)


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
