"""Bad input from one client: which errors close the connection, and that other
clients and already-accepted messages are never affected."""

from __future__ import annotations

import socket
import threading

import pytest
from relaymq.testing import wait_until

from .conftest import BrokerThread, RawClient, connect

FATAL = {
    "unknown command": b"FOO\ndestination:/queue/x\n\n\x00",
    "lowercase command": b"send\ndestination:/queue/x\n\nx\x00",
    "garbage bytes": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n\x00",
    "binary garbage without newline": bytes(range(1, 10)) * 200,
    "header without colon": b"SEND\ndestination:/queue/x\nnocolon\n\nx\x00",
    "negative content-length": b"SEND\ndestination:/queue/x\ncontent-length:-5\n\nx\x00",
    "non-numeric content-length": b"SEND\ndestination:/queue/x\ncontent-length:ten\n\nx\x00",
    "content-length too short": b"SEND\ndestination:/queue/x\ncontent-length:1\n\nxyz\x00",
    "not utf-8 headers": b"SEND\ndestination:/queue/\xff\xfe\n\nx\x00",
    "undefined escape": b"SEND\ndestination:/queue/x\nk:\\q\n\nx\x00",
    "http request": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
}


@pytest.mark.parametrize("name", list(FATAL))
def test_fatal_input_gets_error_and_close(raw, name: str) -> None:
    c = raw()
    c.connect()
    c.send(FATAL[name])
    cmd, h, _ = c.read()
    assert cmd == "ERROR" and h["message"], name
    assert c.closed(), name


@pytest.mark.parametrize("name", ["unknown command", "garbage bytes", "header without colon"])
def test_fatal_input_before_connect(raw, name: str) -> None:
    c = raw()
    c.send(FATAL[name])
    assert c.read()[0] == "ERROR"
    assert c.closed()


def test_limits_from_uri_options(start_broker) -> None:
    bt = start_broker("stomp://127.0.0.1:0?wireFormat.maxDataLength=1000&wireFormat.maxHeaders=5"
                      "&wireFormat.maxHeaderLength=100")
    cases = [
        b"SEND\ndestination:/queue/x\ncontent-length:5000\n\n",
        b"SEND\ndestination:/queue/x\n\n" + b"x" * 5000,
        b"SEND\ndestination:/queue/x\n" + b"".join(b"h%d:v\n" % i for i in range(10)) + b"\nx\x00",
        b"SEND\ndestination:/queue/x\nbig:" + b"v" * 500 + b"\n\nx\x00",
        b"SEND\ndestination:/queue/x\nbig:" + b"v" * 500,  # incomplete, still refused
    ]
    for data in cases:
        c = RawClient(bt)
        try:
            c.connect()
            c.send(data)
            cmd, h, _ = c.read()
            assert cmd == "ERROR", data[:60]
            assert c.closed()
        finally:
            c.close()
    ok = RawClient(bt)
    ok.connect()
    ok.send(b"SEND\ndestination:/queue/x\ncontent-length:1000\nreceipt:r\n\n" + b"x" * 1000 + b"\x00")
    assert ok.read()[0] == "RECEIPT"
    ok.close()


def test_accepted_messages_survive_a_fatal_error(server: BrokerThread, raw) -> None:
    c = raw()
    c.connect()
    c.send(b"SEND\ndestination:/queue/keep\n\none\x00"
           b"SEND\ndestination:/queue/keep\nreceipt:r\n\ntwo\x00"
           b"BOGUS\n\n\x00"
           b"SEND\ndestination:/queue/keep\n\nnever\x00")
    assert c.read()[0] == "RECEIPT"
    assert c.read()[0] == "ERROR"
    assert c.closed()
    assert server.wait_queue_size("keep", 2) == 2


def test_non_fatal_errors_keep_the_connection(raw) -> None:
    c = raw()
    c.connect()
    for frame in (
        "SEND\nreceipt:r\n\nx\x00",                                   # missing destination
        "SUBSCRIBE\ndestination:/queue/a\nid:1\nselector:a ===\nreceipt:r\n\n\x00",
        "ACK\nid:123-456\nreceipt:r\n\n\x00",                        # unknown ack id
        "COMMIT\ntransaction:t9\nreceipt:r\n\n\x00",                 # unknown transaction
        "SUBSCRIBE\ndestination:/queue/a\nid:2\nack:sometimes\nreceipt:r\n\n\x00",
        "CONNECT\naccept-version:1.2\nhost:x\nreceipt:r\n\n\x00",    # already connected
    ):
        c.send(frame)
        cmd, h, _ = c.read()
        assert cmd == "ERROR" and h.get("receipt-id") == "r", frame
    c.send("SEND\ndestination:/queue/alive\nreceipt:alive\n\nx\x00")
    assert c.read()[:2] == ("RECEIPT", {"receipt-id": "alive"})


def test_other_clients_unaffected_by_a_misbehaving_one(server: BrokerThread) -> None:
    cons, col = connect(server)
    cons.subscribe("/queue/iso", id="1", ack="client-individual")
    prod, pcol = connect(server)
    stop = threading.Event()

    def attack() -> None:
        payloads = list(FATAL.values())
        i = 0
        while not stop.is_set():
            try:
                with socket.create_connection((server.host, server.port), timeout=2) as s:
                    s.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
                    s.sendall(payloads[i % len(payloads)])
                    if i % 3 == 0:
                        s.sendall(b"SEND\ndestination:/queue/iso\ncontent-length:999999\n\npartial")
                    i += 1
            except OSError:
                pass

    t = threading.Thread(target=attack)
    t.start()
    try:
        for i in range(200):
            prod.send("/queue/iso", str(i), headers={"persistent": "true"})
        prod.send("/queue/iso", "last", receipt="done")
        assert pcol.wait_receipt("done", 10)
        msgs = col.wait_messages(201, timeout=10)
        assert [m.body for m in msgs] == [str(i) for i in range(200)] + ["last"]
    finally:
        stop.set()
        t.join()
    assert not col.errors and not pcol.errors
    cons.disconnect()
    prod.disconnect()


def test_half_frame_then_disconnect_loses_nothing(server: BrokerThread, raw) -> None:
    c = raw()
    c.connect()
    c.send(b"SEND\ndestination:/queue/half\nreceipt:r\n\nfull\x00SEND\ndestination:/queue/half\n\npar")
    assert c.read()[0] == "RECEIPT"
    c.close()
    wait_until(lambda: not server.call(lambda: server.broker.connections),
               "the broker to drop the connection")
    assert server.queue_size("half") == 1


def test_sends_then_abrupt_close_are_processed(server: BrokerThread) -> None:
    s = socket.create_connection((server.host, server.port))
    s.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00"
              + b"".join(b"SEND\ndestination:/queue/abrupt\n\n%d\x00" % i for i in range(100)))
    s.close()
    assert server.wait_queue_size("abrupt", 100) == 100


def test_client_killed_with_unacked_messages(server: BrokerThread, client, raw) -> None:
    c = raw()
    c.connect()
    c.send("SUBSCRIBE\ndestination:/queue/killed\nid:1\nack:client\n\n\x00")
    prod, pcol = client()
    for i in range(3):
        prod.send("/queue/killed", str(i))
    for _ in range(3):
        assert c.read()[0] == "MESSAGE"
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    c.close()  # RST
    cons, col = client()
    cons.subscribe("/queue/killed", id="1")
    assert sorted(m.body for m in col.wait_messages(3)) == ["0", "1", "2"]
