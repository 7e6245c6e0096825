"""A TCP server that accepts each connection and closes it at once, counting them:
a database server that is down from a client's point of view, whose count of
attempts tells a test how often a broker has tried."""

from __future__ import annotations

import socket
import threading


class SilentServer:
    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()
