"""Empty a bench queue before a run.

Why: a run that was interrupted (Ctrl-C, a broker restart) leaves messages
behind; the next run would receive them first, count them as foreign, and
its rates would include draining someone else's backlog.  Purging through
the protocol itself keeps this broker-neutral (no admin API needed): consume
pre-settled / auto-acked until the queue has been quiet for ``idle`` seconds.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable
from typing import Any

from . import amqp_codec as ac
from .amqp_client import RECV_SIZE, AmqpClient, LinkOptions
from .stomp_client import StompClient
from .targets import Endpoint


def _drain(sock: socket.socket, idle: float, limit: float,
           on_chunk: Callable[[bytes], None]) -> None:
    sock.setblocking(False)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        r, _, _ = select.select([sock], [], [], idle)
        if not r:
            return
        chunk = sock.recv(RECV_SIZE)
        if not chunk:
            raise ConnectionError("broker closed the connection while purging")
        on_chunk(chunk)


def purge_amqp(ep: Endpoint, link: dict[str, Any], idle: float = 0.3, limit: float = 60.0) -> int:
    """Drain an AMQP node with a pre-settled receiver; returns messages removed."""
    client = AmqpClient(ep.host, ep.port, ep.user, ep.password, ep.vhost)
    count = 0
    try:
        client.attach_receiver(LinkOptions(link["address"], link.get("durable", 0),
                                           tuple(link.get("capabilities", ())),
                                           link.get("expiry_policy")), presettled=True)
        credit = 5000
        client.sock.sendall(client._flow(credit))
        pending = client._rbuf
        granted = credit
        client._rbuf = b""

        def on_chunk(chunk: bytes) -> None:
            nonlocal count, pending, granted
            data = pending + chunk
            frames, used = ac.split_frames(data)
            pending = data[used:]
            for fr in frames:
                if len(fr.body) > 3 and fr.body[2] == ac.TRANSFER:
                    client.next_incoming_id += 1
                    _, _, more, _ = ac.parse_transfer(fr.body, 0, len(fr.body))
                    if not more:
                        count += 1
                        client.delivery_count += 1
                        granted -= 1
            if granted < credit // 2:
                client._send(client._flow(credit))
                granted = credit

        _drain(client.sock, idle, limit, on_chunk)
    finally:
        client.close()
    return count


def purge_stomp(ep: Endpoint, address: str, idle: float = 0.3, limit: float = 60.0) -> int:
    """Drain a STOMP queue with an auto-ack subscription; returns messages removed (approx.)."""
    client = StompClient(ep.host, ep.port, ep.user, ep.password, ep.vhost or "/")
    count = 0
    try:
        client.subscribe(address, 5000, ack="auto")
        count = client._rbuf.count(b"MESSAGE\n")

        def on_chunk(chunk: bytes) -> None:
            nonlocal count
            count += chunk.count(b"MESSAGE\n")

        _drain(client.sock, idle, limit, on_chunk)
    finally:
        client.close()
    return count
