"""Line-based control channel between the coordinator and a worker process.

Why stdin/stdout lines: workers are plain subprocesses, the coordinator needs
"ready"/"progress"/"result" from them and must send "go"/"expect N"/"stop",
and both sides must stay in one select() loop with the broker socket.  JSON
lines keep it debuggable (and pickle-free).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


class Control:
    """Non-blocking reader of coordinator commands on a file descriptor."""

    def __init__(self, fd: int | None = None):
        self.fd = sys.stdin.fileno() if fd is None else fd
        os.set_blocking(self.fd, False)
        self._partial = b""
        self.closed = False

    def fileno(self) -> int:
        return self.fd

    def read_commands(self) -> list[str]:
        """Complete lines available now (an EOF counts as "stop")."""
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        if not chunk:
            if self.closed:
                return []
            self.closed = True
            return ["stop"]
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        return [ln.decode().strip() for ln in lines if ln.strip()]


def emit(event: str, **fields: Any) -> None:
    """Write one JSON event line to stdout for the coordinator."""
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()
