"""Fixtures: a real broker with a STOMP connector, on its own event loop thread.

stomp.py is a blocking client with its own receiver thread, so the broker runs
on an asyncio loop in a background thread and tests are plain functions. Tests
reach into the broker (queue sizes, hook registration) with `BrokerThread.call`.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import stomp
from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig
from relaymq.testing import broker_config
from relaymq.testing.stomp_collector import Collector
from relaymq.testing.threads import BrokerThread as BaseBrokerThread


class BrokerThread(BaseBrokerThread):
    """A started broker on a private loop in a daemon thread; `host` and `port` are
    its connector for `scheme`."""

    def __init__(self, config: BrokerConfig, setup: Callable[[Broker], None] | None = None,
                 scheme: str = "stomp",
                 loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
                 ) -> None:
        super().__init__(config, setup, loop_factory)
        self.scheme = scheme
        self.host, self.port = self.address(scheme)

    def read_paused(self) -> bool:
        """True while flow control holds back some connection's reads."""
        return bool(self.call(lambda: [p._read_paused for c in self.broker.connectors
                                       for p in c.connections if p._read_paused]))

    def wait_queue_size(self, name: str, size: int, timeout: float = 5.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            n = self.queue_size(name)
            if n == size or time.monotonic() > deadline:
                return n
            time.sleep(0.02)

@pytest.fixture
def start_broker() -> Iterator[Callable[..., BrokerThread]]:
    """`start_broker(uri="stomp://127.0.0.1:0", setup=None, **config_fields)`."""
    started: list[BrokerThread] = []

    def start(*uris: str, setup: Callable[[Broker], None] | None = None,
              config: BrokerConfig | None = None, scheme: str | None = None,
              loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
              **fields: Any) -> BrokerThread:
        uris = uris or ("stomp://127.0.0.1:0",)
        cfg = config or broker_config(*uris, **fields)
        bt = BrokerThread(cfg, setup, scheme or uris[0].split("://")[0], loop_factory)
        started.append(bt)
        return bt

    yield start
    for bt in started:
        bt.stop()


@pytest.fixture
def server(start_broker: Callable[..., BrokerThread]) -> BrokerThread:
    """A broker with the memory store and a STOMP connector on a free port."""
    return start_broker()


# -- stomp.py helpers --------------------------------------------------------------------


def connect(bt: BrokerThread, version: str = "1.2", heartbeats: tuple[int, int] = (0, 0),
            **connect_kw: Any) -> tuple[stomp.Connection12, Collector]:
    cls = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}[version]
    kw: dict[str, Any] = {"reconnect_attempts_max": 1}
    if version != "1.0":
        kw["heartbeats"] = heartbeats
    conn = cls([(bt.host, bt.port)], **kw)
    col = Collector()
    conn.set_listener("collector", col)
    conn.connect(wait=True, **connect_kw)
    return conn, col


@pytest.fixture
def client(server: BrokerThread) -> Iterator[Callable[..., tuple[Any, Collector]]]:
    """`client(version="1.2", **connect_headers)` -> (stomp.py connection, Collector)."""
    made: list[Any] = []

    def make(version: str = "1.2", bt: BrokerThread | None = None, **kw: Any) -> tuple[Any, Collector]:
        conn, col = connect(bt or server, version, **kw)
        made.append(conn)
        return conn, col

    yield make
    for c in made:
        if c.is_connected():
            try:
                c.disconnect()
            except Exception:  # noqa: BLE001
                pass


def subscribe(conn: Any, col: Collector, destination: str, id: str, **kw: Any) -> None:
    """SUBSCRIBE and wait for its receipt, so messages sent afterwards from other
    connections are sure to find the subscription."""
    rid = receipt()
    conn.subscribe(destination, id=id, receipt=rid, **kw)
    assert col.wait_receipt(rid), f"no receipt for SUBSCRIBE {destination}"


def unescape(text: str) -> str:
    """STOMP 1.1/1.2 header unescaping, written independently of the plugin's."""
    if "\\" not in text:
        return text
    table = {"n": "\n", "c": ":", "\\": "\\", "r": "\r"}
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            out.append(table[text[i + 1]])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def receipt() -> str:
    return uuid.uuid4().hex[:12]


# -- raw socket client for malformed input --------------------------------------------------


class RawClient:
    """A socket that speaks STOMP by hand: sends any bytes, reads frames back."""

    def __init__(self, bt: BrokerThread, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((bt.host, bt.port), timeout=timeout)
        self.buf = b""
        self.heartbeats = 0

    def send(self, data: bytes | str) -> None:
        self.sock.sendall(data.encode() if isinstance(data, str) else data)

    def connect(self, headers: str = "accept-version:1.2\nhost:localhost\n") -> dict[str, str]:
        self.send(f"CONNECT\n{headers}\n\x00")
        cmd, h, _ = self.read()
        assert cmd == "CONNECTED", (cmd, h)
        return h

    def read(self, timeout: float = 5.0) -> tuple[str, dict[str, str], bytes]:
        """Next frame (heart-beat EOLs are counted and skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            while self.buf[:1] in (b"\n", b"\r") and self.buf:
                if self.buf[:1] == b"\n":
                    self.heartbeats += 1
                self.buf = self.buf[1:]
            end = self.buf.find(b"\n\n")
            if end >= 0:
                head = self.buf[:end].decode()
                lines = head.split("\n")
                headers: dict[str, str] = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    if lines[0] != "CONNECTED":
                        k, v = unescape(k), unescape(v)
                    headers.setdefault(k, v)
                start = end + 2
                if "content-length" in headers:
                    stop = start + int(headers["content-length"])
                    if len(self.buf) > stop:
                        assert self.buf[stop:stop + 1] == b"\x00"
                        body = self.buf[start:stop]
                        self.buf = self.buf[stop + 1:]
                        return lines[0], headers, body
                else:
                    stop = self.buf.find(b"\x00", start)
                    if stop >= 0:
                        body = self.buf[start:stop]
                        self.buf = self.buf[stop + 1:]
                        return lines[0], headers, body
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no complete frame; buffered {self.buf[:200]!r}")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed by the broker; buffered {self.buf[:200]!r}")
            self.buf += chunk

    def closed(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the socket (after any pending frames)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not chunk:
                return True
            self.buf += chunk
        return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(server: BrokerThread) -> Iterator[Callable[..., RawClient]]:
    made: list[RawClient] = []

    def make(bt: BrokerThread | None = None) -> RawClient:
        c = RawClient(bt or server)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


FLOOD_BODY = b"x" * 1024


def flood(host: str, port: int, n: int, done: threading.Event, dest: str = "/queue/flow") -> None:
    """Send `n` 1 KiB messages to `dest` in bursts of 50 without reading, then one with a
    receipt; set `done` once the receipt came (or the connection closed)."""
    with socket.create_connection((host, port)) as s:
        s.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
        frames = [b"SEND\ndestination:%s\nseq:%d\ncontent-length:1024\n\n%s\x00"
                  % (dest.encode(), i, FLOOD_BODY) for i in range(n)]
        for i in range(0, n, 50):
            s.sendall(b"".join(frames[i:i + 50]))
        s.sendall(b"SEND\ndestination:%s\nreceipt:end\n\nlast\x00" % dest.encode())
        buf = b""
        while b"receipt-id:end" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    done.set()
