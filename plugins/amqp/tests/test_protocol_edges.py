"""Protocol corners real clients rarely reach: a coordinator (transactions),
ending a session with live links, attaching the same durable subscription twice."""

from __future__ import annotations

import socket
import time
from typing import Any

from proton import Message
from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Engine, Terminus
from relaymq_amqp.sasl import SaslClient


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("on_"):
            raise AttributeError(name)
        return lambda *a: self.items.append((name, a))

    def names(self) -> list[str]:
        return [n for n, _ in self.items]


class EngineClient:
    """A blocking AMQP client on the plugin's own engine layer, over a real socket."""

    def __init__(self, address: str, container_id: str = "edge") -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        sasl = SaslClient()
        self.sock.sendall(sasl.start())
        leftover = b""
        while True:
            out, ok, leftover = sasl.feed(self.sock.recv(65536))
            if out:
                self.sock.sendall(out)
            if ok is not None:
                assert ok
                break
        self.engine = Engine(server=False)
        self.events = Events()
        self.engine.open(container_id=container_id)
        self.session = self.engine.session()
        pn.session_open(self.session)
        if leftover:
            self.engine.push(leftover)
        self.until(lambda: "on_connection_remote_open" in self.events.names())

    def until(self, cond: Any, timeout: float = 5) -> None:
        end = time.monotonic() + timeout
        self.sock.settimeout(0.05)
        while True:
            self.engine.pump(self.events)
            out = self.engine.output()
            while out:
                self.sock.sendall(out)
                out = self.engine.output()
            if cond():
                return
            if time.monotonic() >= end:
                raise TimeoutError(f"condition not reached; events: {self.events.names()}")
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                self.engine.close_tail()
            else:
                self.engine.push(data)

    def close(self) -> None:
        self.sock.close()
        self.engine.free()


def test_a_coordinator_attach_is_answered_with_its_capabilities(amqp_broker: Any) -> None:
    c = EngineClient(amqp_broker.address())
    try:
        link = pn.sender(c.session, "txn-controller")
        pn.set_source(link, Terminus(kind=1))
        pn.set_target(link, Terminus(kind=3, capabilities=["amqp:local-transactions"]))
        pn.link_open(link)
        c.until(lambda: pn.remote_target(link).kind == 3)
        target = pn.remote_target(link)
        assert "amqp:local-transactions" in target.capabilities
        assert not pn.link_remote_closed(link)
    finally:
        c.close()


def test_ending_a_session_releases_its_consumers(amqp_broker: Any, connect: Any) -> None:
    connect().create_sender("queue://ssn").send(Message(body="x"))
    c = EngineClient(amqp_broker.address())
    try:
        link = pn.receiver(c.session, "r")
        pn.set_source(link, Terminus(address="queue://ssn", kind=1))
        pn.set_target(link, Terminus(kind=2))
        pn.link_open(link)
        pn.link_flow(link, 1)
        c.until(lambda: "on_delivery" in c.events.names())
        pn.session_close(c.session)  # the delivery was never settled
        c.until(lambda: "on_session_remote_close" in c.events.names())
    finally:
        c.close()
    m = connect().create_receiver("queue://ssn", credit=1).receive(timeout=5)
    assert m.body == "x" and m.delivery_count == 1


def test_a_durable_subscription_has_one_consumer_at_a_time(amqp_broker: Any) -> None:
    first = EngineClient(amqp_broker.address(), container_id="dup")
    second = EngineClient(amqp_broker.address(), container_id="dup")
    try:
        links = []
        for c in (first, second):
            link = pn.receiver(c.session, "sub")
            pn.set_source(link, Terminus(address="topic://t", durable=2, expiry_policy=pn.EXPIRE_NEVER,
                                         kind=1))
            pn.set_target(link, Terminus(kind=2))
            pn.link_open(link)
            links.append(link)
        first.until(lambda: "on_link_remote_open" in first.events.names())
        second.until(lambda: pn.link_remote_closed(links[1]))
        cond = pn.link_remote_condition(links[1])
        assert cond is not None and cond.name == "amqp:resource-locked"
    finally:
        first.close()
        second.close()
