"""Real broker processes for the kahaDB tests: `relaymq run --config activemq.xml`
on ephemeral ports, stopped with SIGTERM or killed with SIGKILL, and a blocking
STOMP client that shows every frame."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """One `relaymq run` on `tmp/kahadb` with a STOMP connector; its log in a file."""

    def __init__(self, tmp: Path, kahadb: str = "", extra: str = "", name: str = "kaha") -> None:
        self.tmp = tmp
        self.port = free_port()
        self.config = tmp / f"{name}.xml"
        self.config.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
    brokerName="{name}" dataDirectory="{tmp}">
  <persistenceAdapter><kahaDB directory="{tmp / 'kahadb'}" {kahadb}/></persistenceAdapter>
  {extra}
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.port}"/>
  </transportConnectors>
</broker></beans>""")
        self.log = tmp / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *, wait: bool = True) -> BrokerProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([RELAYMQ, "run", "--config", str(self.config)],
                                         stdout=out, stderr=subprocess.STDOUT)
        if not wait:
            return self
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError as exc:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"broker exited:\n{self.output()}") from exc
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not start listening:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


class Stomp:
    """A minimal blocking STOMP 1.2 client."""

    def __init__(self, port: int, **headers: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), 10)
        self.buf = b""
        self.frame("CONNECT", {"accept-version": "1.2", "host": "localhost", **headers})
        cmd, head, _ = self.read()
        assert cmd == "CONNECTED", head

    def frame(self, command: str, headers: dict[str, str], body: bytes = b"") -> None:
        head = "".join(f"{k}:{v}\n" for k, v in headers.items())
        self.sock.sendall(f"{command}\n{head}\n".encode() + body + b"\0")

    def read(self) -> tuple[str, dict[str, str], bytes]:
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
            self.sock.settimeout(10)
        return out

    def close(self) -> None:
        self.sock.close()
