"""The mirror link's attach, byte for byte as AMQP 1.0 lays it out (section
2.7.3: max-message-size is field 10, offered-capabilities 11,
desired-capabilities 12, properties 13), built and read with proton's own codec
over a raw socket, not with RelayMQ's client: Artemis desires `amq.mirror` in
field 12 and expects it offered back in field 11."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from proton import Data

MIRROR = "$ACTIVEMQ_ARTEMIS_MIRROR_layout"


def _performative(code: int, put_fields: Any) -> bytes:
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(code)
    d.put_list()
    d.enter()
    put_fields(d)
    d.exit()
    d.exit()
    return d.encode()


def _frame(body: bytes) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 0, 0) + body


def _terminus(d: Data, code: int, address: str) -> None:
    d.put_described()
    d.enter()
    d.put_ulong(code)
    d.put_list()
    d.enter()
    d.put_string(address)
    d.exit()
    d.exit()


def _attach_fields(d: Data) -> None:
    d.put_string(f"{MIRROR}:layout")  # 0 name
    d.put_uint(0)  # 1 handle
    d.put_bool(False)  # 2 role: sender
    d.put_ubyte(0)  # 3 snd-settle-mode: unsettled
    d.put_ubyte(0)  # 4 rcv-settle-mode: first
    _terminus(d, 0x28, MIRROR)  # 5 source
    _terminus(d, 0x29, MIRROR)  # 6 target
    d.put_null()  # 7 unsettled
    d.put_null()  # 8 incomplete-unsettled
    d.put_uint(0)  # 9 initial-delivery-count
    d.put_null()  # 10 max-message-size
    d.put_null()  # 11 offered-capabilities
    d.put_array(False, Data.SYMBOL)  # 12 desired-capabilities
    d.enter()
    d.put_symbol("amq.mirror")
    d.exit()
    d.put_map()  # 13 properties
    d.enter()
    d.put_symbol("x-opt-amq-bkr-id")
    d.put_string("layout-source-node")
    d.exit()


def _frames(data: bytes) -> list[list[Any]]:
    """Each performative in `data` (after the 8-byte protocol header) as
    [code, fields]."""
    out = []
    pos = 8
    while pos + 8 <= len(data):
        size, doff = struct.unpack_from(">IB", data, pos)
        body = data[pos + doff * 4:pos + size]
        pos += size
        if not body:
            continue  # an empty (heartbeat) frame
        d = Data()
        d.decode(body)
        d.rewind()
        d.next()
        described = d.get_object()
        out.append([int(described.descriptor), list(described.value)])
    return out


def test_the_mirror_capability_is_read_and_offered_in_the_spec_fields(brokers: Any) -> None:
    b = brokers()
    host, port = b.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"AMQP\x00\x01\x00\x00"
                  + _frame(_performative(0x10, lambda d: d.put_string("layout-test")))
                  + _frame(_performative(0x11, lambda d: (d.put_null(), d.put_uint(0),
                                                          d.put_uint(2048), d.put_uint(2048))))
                  + _frame(_performative(0x12, _attach_fields)))
        data = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            s.settimeout(max(deadline - time.monotonic(), 0.1))
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
            if any(code == 0x12 for code, _ in _frames(data)):
                break
    frames = _frames(data)
    attaches = [fields for code, fields in frames if code == 0x12]
    assert attaches, frames
    reply = attaches[0] + [None] * 14
    assert reply[10] in (None, 0), reply  # max-message-size (0: no limit), no capabilities
    assert "amq.mirror" in [str(c) for c in (reply[11] or [])], reply
    assert reply[6] is not None, reply  # a target: the link is accepted, not refused
    assert not [fields for code, fields in frames if code in (0x16, 0x18)], frames  # no detach/close
