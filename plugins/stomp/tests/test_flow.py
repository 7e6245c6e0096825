"""Flow control: producers are slowed by not reading their sockets; slow consumers
do not make the broker acknowledge (and buffer) a whole queue."""

from __future__ import annotations

import socket
import threading

from relaymq.config.model import SystemUsageConfig, UsageLimit
from relaymq.testing import wait_until

from .conftest import FLOOD_BODY as BODY
from .conftest import RawClient, connect, flood


def testflood_is_paused_while_memory_is_full(start_broker) -> None:
    bt = start_broker(system_usage=SystemUsageConfig(memory=UsageLimit(limit=300_000)))
    n = 3000
    done = threading.Event()
    t = threading.Thread(target=flood, args=(bt.host, bt.port, n, done), daemon=True)
    t.start()
    wait_until(bt.read_paused, "the producer's connection paused by flow control")
    assert not done.is_set()
    held = bt.queue_size("flow")
    assert 0 < held < 600, held
    # nothing more accepted while full: memoryUsage stays at its limit (plus the
    # message that filled it)
    used = bt.call(lambda: bt.broker.usage.memory.used)
    assert used <= 300_000 + 2 * len(BODY) + 1024, used
    assert bt.read_paused() and bt.queue_size("flow") == held

    cons, col = connect(bt)
    cons.subscribe("/queue/flow", id="1", ack="auto")
    msgs = col.wait_messages(n + 1, timeout=30)
    assert done.wait(10)
    assert [m.headers.get("seq") for m in msgs[:n]] == [str(i) for i in range(n)]
    assert msgs[n].body == "last"
    cons.disconnect()


def test_slow_auto_ack_consumer_does_not_drain_the_queue(start_broker) -> None:
    bt = start_broker()
    c = RawClient(bt)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/slow\nid:1\nack:auto\nactivemq.prefetchSize:100\n\n\x00")
    n = 12000
    done = threading.Event()
    flood(bt.host, bt.port, n, done, "/queue/slow")

    def consumer_write_paused() -> bool:
        return bool(bt.call(lambda: [p for c in bt.broker.connectors for p in c.connections
                                     if p._write_paused]))

    # The consumer reads nothing: once the broker's writes to it are paused, only what
    # fits in the socket buffers (the kernel's and the transport's, a few MB on
    # loopback) is acknowledged.
    wait_until(consumer_write_paused, "writes to the consumer paused")
    remaining = bt.queue_size("slow")
    assert remaining > n - 6000, remaining
    got = 0
    while got < n + 1:
        cmd, h, body = c.read(timeout=10)
        assert cmd == "MESSAGE"
        if got < n:
            assert h["seq"] == str(got)
        got += 1
    assert bt.wait_queue_size("slow", 0) == 0
    c.close()


def test_lost_client_blocked_by_flow_control_releases_its_deliveries(start_broker) -> None:
    """A client that consumed (unacked) and produced into a full broker, then vanished:
    its deliveries come back at once, so other clients are not stuck behind it.

    Reading pauses once `maxPendingFrames` frames wait behind the held send. One
    read takes up to 256 KiB (asyncio's and uvloop's read size): when the broker's
    loop is late (a loaded machine), a single read swallows some 250 of the 400
    frames, fewer than the default 256 would be left queued, and reading never
    needs to pause. A small `maxPendingFrames` makes the pause certain."""
    bt = start_broker("stomp://127.0.0.1:0?maxPendingFrames=16",
                      system_usage=SystemUsageConfig(memory=UsageLimit(limit=200_000)))
    c = RawClient(bt)
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/held\nid:1\nack:client\n\n\x00")
    frame = b"SEND\ndestination:/queue/held\ncontent-length:1024\n\n" + BODY + b"\x00"
    c.sock.sendall(frame * 100)  # all delivered to itself, unacked
    for _ in range(100):
        assert c.read()[0] == "MESSAGE"
    c.sock.sendall(frame * 400)  # memory fills; this connection's sends wait
    wait_until(bt.read_paused, "the client's connection paused by flow control")
    c.close()
    cons, col = connect(bt)
    cons.subscribe("/queue/held", id="1")
    assert len(col.wait_messages(100, timeout=10)) >= 100
    cons.disconnect()
