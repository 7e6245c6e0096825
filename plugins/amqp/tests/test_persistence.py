"""Durable AMQP messages on a persistent store: settled only once stored, kept
across a broker restart with their bytes and lazily loaded properties, and
durable subscriptions resumed after the restart. Also TTL and message groups."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from proton import Message
from proton.reactor import DurableSubscription
from relaymq.config.model import BrokerConfig
from relaymq.testing import broker_config, plugin_element, wait_until

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")


def kaha(tmp_path: Path) -> BrokerConfig:
    c = broker_config("amqp://127.0.0.1:0", persistent=True, data_directory=str(tmp_path))
    c.persistence_adapter = plugin_element("kahaDB")
    return c


def test_durable_messages_survive_a_restart(make_broker: Any, connect: Any, tmp_path: Path) -> None:
    first = make_broker(config=kaha(tmp_path))
    c = connect(first.url(), container_id="durable-client")
    sub = c.create_receiver("topic://audit", name="keeper", credit=10, options=DurableSubscription())
    sub.link.detach()
    s = c.create_sender("queue://keep")
    sent = Message(body="persist me", durable=True, id="ID:k1", properties={"color": "red", "n": 3})
    s.send(sent)  # returns when settled: accepted only after the store wrote it
    s.send(Message(body="transient", durable=False))
    c.create_sender("topic://audit").send(Message(body="for the subscription", durable=True))
    c.close()
    first.stop()

    second = make_broker(config=kaha(tmp_path))
    c2 = connect(second.url(), container_id="durable-client")
    broker = second.broker
    stored = second.call(lambda: [e.message for e in
                                  broker.region.queues[_queue("keep")].pending.window(10)])
    assert len(stored) == 1  # the non-durable one is gone
    assert stored[0].encoded == bytes(sent.encode()) and stored[0]._properties is None
    r = c2.create_receiver("queue://keep", credit=5, options=_selector("color = 'red' AND n = 3"))
    m = r.receive(timeout=5)
    assert (m.body, m.id, m.properties, m.durable) == ("persist me", "ID:k1", {"color": "red", "n": 3}, True)
    r.accept()
    resumed = c2.create_receiver("topic://audit", name="keeper", credit=5, options=DurableSubscription())
    assert resumed.receive(timeout=5).body == "for the subscription"


def _queue(name: str) -> Any:
    from relaymq.model.destination import Destination

    return Destination.queue(name)


def _selector(text: str) -> Any:
    from proton.reactor import Selector

    return Selector(text)


def test_ttl_expires_unconsumed_messages(connect: Any) -> None:
    c = connect()
    s = c.create_sender("queue://ttl")
    sent = time.time()
    s.send(Message(body="short-lived", ttl=0.05))
    s.send(Message(body="long-lived", ttl=60))
    # the short TTL has passed (a condition on the clock, not a pause before asserting)
    wait_until(lambda: time.time() > sent + 0.2, "the short TTL to pass")
    r = c.create_receiver("queue://ttl", credit=5)
    assert r.receive(timeout=5).body == "long-lived"


def test_group_id_keeps_a_group_on_one_consumer(connect: Any) -> None:
    c = connect()
    r1 = c.create_receiver("queue://groups", credit=20, name="one")
    r2 = c.create_receiver("queue://groups", credit=20, name="two")
    s = c.create_sender("queue://groups")
    for i in range(6):
        s.send(Message(body=f"A{i}", group_id="A", group_sequence=i + 1))
        s.send(Message(body=f"B{i}", group_id="B", group_sequence=i + 1))
    seen: dict[str, set[str]] = {"one": set(), "two": set()}
    end = time.monotonic() + 5
    total = 0
    while total < 12 and time.monotonic() < end:
        for name, r in (("one", r1), ("two", r2)):
            c.container.timeout = 0.01
            c.container.process()
            while r.fetcher.has_message:
                m = r.fetcher.pop()
                seen[name].add(m.group_id)
                total += 1
    assert total == 12
    assert not (seen["one"] & seen["two"])  # no group is split across consumers


@pytest.mark.parametrize("body", [b"\x00\x01binary" * 700, "text " * 1500,
                                  {"map": [1, 2.5, "three"]}, ["a", "list", 7]],
                         ids=["data", "string", "map", "list"])
def test_stored_bodies_are_kept_once_and_come_back_whole(make_broker: Any, connect: Any,
                                                         tmp_path: Path, body: Any) -> None:
    """The journal keeps the message's AMQP bytes only (the body is a section of
    them), and every body kind comes back whole after a restart."""
    first = make_broker(config=kaha(tmp_path))
    c = connect(first.url())
    sent = Message(body=body, durable=True, properties={"kind": type(body).__name__})
    c.create_sender("queue://bodies").send(sent)
    c.close()
    first.stop()
    # sparse preallocation: count the bytes written, not the file length
    written = sum(len(f.read_bytes().rstrip(b"\0")) for f in (tmp_path / "kahadb").glob("db-*.log"))
    assert 0 < written < len(sent.encode()) + 600

    second = make_broker(config=kaha(tmp_path))
    c2 = connect(second.url())
    r = c2.create_receiver("queue://bodies", credit=1)
    m = r.receive(timeout=5)
    assert (m.body, m.properties, m.durable) == (body, {"kind": type(body).__name__}, True)
    r.accept()
    c2.close()
