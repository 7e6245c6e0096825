"""The peer's side of federation on the wire: an AMQP client playing an
Artemis broker (link names, properties, capabilities and filters as Artemis
sends them; see shared/reference/artemis-broker-connections-wire.md) against a
`relaymq run` broker; and bad input refused on its own link only."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from fed_artemis_side import NODE, artemis, control_link, until
from fedtools import Brokers, send
from proton import Message
from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Terminus
from relaymq_amqp.outgoing import AmqpConnection, LinkRefused
from relaymq_amqp.types import Described, Symbol, ULong
from relaymq_federation import wire
from relaymq_federation.config import AddressPolicy, QueuePolicy
from relaymq_federation.hops import HOPS, hops_of, max_hops_selector
from relaymq_federation.operation import DELETE_ON_CLOSE, policy_command


def address_source(address: str, max_hops: int) -> Terminus:
    queue = wire.address_queue_name("fed", "p", address, NODE)
    return Terminus(kind=1, address=f"{address}::{queue}", capabilities=["topic"],
                    expiry_policy=pn.EXPIRE_WITH_LINK, filter={
                        Symbol(wire.NO_LOCAL_KEY): Described(ULong(wire.NO_LOCAL_CODE), "NoLocalFilter{}"),
                        Symbol(wire.SELECTOR_KEY): Described(ULong(wire.SELECTOR_CODE),
                                                             max_hops_selector(max_hops))})


async def plain_send_works(conn: AmqpConnection, queue: str) -> None:
    """The connection still serves ordinary links."""
    sender = await conn.open_sender(f"queue://{queue}")
    outcome = await sender.send(bytes(Message(body="still here").encode()))
    assert outcome.accepted


async def test_artemis_control_link_address_and_queue_receivers(brokers: Brokers) -> None:
    brokers.start("b", queues=("work.1",))
    conn = await artemis(brokers)
    try:
        control = await control_link(conn)
        assert control.remote_offered_capabilities == [wire.CONTROL_LINK]
        assert control.remote_properties == {wire.VERSION: 2}
        assert control.remote_target.address == control.name  # the dynamic target's address
        for command in (policy_command(wire.ADD_ADDRESS_POLICY, AddressPolicy("p", ["x.#"], [], 2).to_map()),
                        policy_command(wire.ADD_QUEUE_POLICY, QueuePolicy("q", [("#", "x.*")]).to_map())):
            assert (await control.send(command)).accepted

        got: list[bytes] = []

        def keep(m: Any) -> None:
            got.append(m.data)
            m.accept()

        receiver = await conn.attach_receiver(
            f"federation-fed-policy-p-address-receiver-news.eu-{NODE}-1", address_source("news.eu", 2),
            Terminus(kind=2, address="news.eu"), on_message=keep, credit=10,
            desired_capabilities=[wire.ADDRESS_RECEIVER],
            properties={wire.ADDRESS_SOURCE_PROPERTIES: {"auto-delete": False},
                        wire.POLICY_NAME: "p"})
        assert receiver.remote_offered_capabilities == [wire.ADDRESS_RECEIVER]
        with_hops = [Message(body=f"h{n}") for n in range(3)] + [Message(body="marker")]
        for n, m in enumerate(with_hops[1:3], start=1):
            m.annotations = {HOPS: n}
        await asyncio.to_thread(_send_messages, brokers.url("b"), "topic://news.eu", with_hops)
        await until(lambda: "marker" in _bodies(got), "the marker sent last")
        # hops 0 and 1 pass max-hops=2, hops 2 does not (the marker came after it)
        assert _bodies(got) == ["h0", "h1", "marker"]
        assert [hops_of(d) for d in got] == [0, 1, 0]

        qgot: list[bytes] = []
        qreceiver = await conn.attach_receiver(
            f"federation-fed-policy-q-queue-receiver-work.1::work.1-{NODE}:2",
            Terminus(kind=1, address="work.1::work.1", capabilities=["queue"],
                     expiry_policy=pn.EXPIRE_WITH_LINK),
            Terminus(kind=2, address="work.1::work.1"),
            on_message=lambda m: (qgot.append(m.data), m.accept()), credit=10,
            desired_capabilities=[wire.QUEUE_RECEIVER],
            properties={wire.PRIORITY: -1, wire.POLICY_NAME: "q"})
        assert qreceiver.remote_offered_capabilities == [wire.QUEUE_RECEIVER]
        await asyncio.to_thread(send, brokers.url("b"), "queue://work.1", ["w1", "w2"])
        await until(lambda: len(qgot) == 2, "two messages on the queue receiver")
        assert _bodies(qgot) == ["w1", "w2"]
    finally:
        await conn.close()


def _bodies(datas: list[bytes]) -> list[Any]:
    out = []
    for data in datas:
        m = Message()
        m.decode(data)
        out.append(m.body)
    return out


def _send_messages(url: str, address: str, messages: list[Message]) -> None:
    from fedtools import client

    with client(url) as c:
        s = c.create_sender(address)
        for m in messages:
            s.send(m)


async def test_federation_link_without_control_link_is_refused_alone(brokers: Brokers) -> None:
    brokers.start("b", queues=("work.1",))
    conn = await artemis(brokers)
    try:
        with pytest.raises(LinkRefused, match="precondition-failed.*control link"):
            await conn.attach_receiver(
                f"federation-fed-policy-p-address-receiver-news.eu-{NODE}-1",
                address_source("news.eu", 1), Terminus(kind=2, address="news.eu"),
                on_message=lambda m: m.accept(), desired_capabilities=[wire.ADDRESS_RECEIVER])
        await plain_send_works(conn, "work.1")
    finally:
        await conn.close()


@pytest.mark.parametrize("op, policy, why", [
    (wire.ADD_ADDRESS_POLICY, {"policy-name": "p", "address-includes": ["a.#"]}, "max-hops"),
    (wire.ADD_ADDRESS_POLICY, {"max-hops": 1}, "policy-name"),
    (wire.ADD_QUEUE_POLICY, {"priority-adjustment": -1}, "policy-name"),
    ("ADD_SOMETHING_ELSE", {"policy-name": "p"}, "unknown federation operation"),
])
async def test_bad_policy_command_is_rejected_and_closes_only_the_control_link(
        brokers: Brokers, op: str, policy: dict[str, Any], why: str) -> None:
    brokers.start("b", queues=("work.1",))
    conn = await artemis(brokers)
    try:
        control = await control_link(conn)
        outcome = await control.send(policy_command(op, policy))
        assert outcome.state == "rejected" and why in str(outcome.condition)
        await until(lambda: control.closed, "the control link closed by the broker")
        await plain_send_works(conn, "work.1")
    finally:
        await conn.close()


async def test_queue_receiver_for_a_missing_queue_is_refused_alone(brokers: Brokers) -> None:
    brokers.start("b", queues=("work.1",))
    conn = await artemis(brokers)
    try:
        await control_link(conn)

        async def queue_receiver(queue: str) -> Any:
            return await conn.attach_receiver(
                f"federation-fed-policy-q-queue-receiver-{queue}::{queue}-{NODE}:{uuid.uuid4()}",
                Terminus(kind=1, address=f"{queue}::{queue}", capabilities=["queue"]),
                Terminus(kind=2, address=f"{queue}::{queue}"), on_message=lambda m: m.accept(),
                desired_capabilities=[wire.QUEUE_RECEIVER], properties={wire.PRIORITY: -1})

        with pytest.raises(LinkRefused, match="not-found.*missing.1"):
            await queue_receiver("missing.1")
        assert (await queue_receiver("work.1")).remote_offered_capabilities == [wire.QUEUE_RECEIVER]
        await plain_send_works(conn, "work.1")
    finally:
        await conn.close()


async def test_missing_queue_is_announced_on_the_events_link_when_created(brokers: Brokers) -> None:
    brokers.start("b")
    conn = await artemis(brokers)
    try:
        await control_link(conn)
        events: list[bytes] = []
        link = await conn.attach_receiver(
            f"{wire.EVENTS_RECEIVER_PREFIX}fed:{NODE}:{uuid.uuid4()}",
            Terminus(kind=1, dynamic=True, capabilities=["temporary-topic"],
                     expiry_policy=pn.EXPIRE_WITH_LINK,
                     dynamic_node_properties={Symbol("lifetime-policy"): DELETE_ON_CLOSE}),
            Terminus(kind=2), on_message=lambda m: (events.append(m.data), m.accept()), credit=10,
            desired_capabilities=[wire.EVENT_LINK])
        assert link.remote_offered_capabilities == [wire.EVENT_LINK]
        assert link.remote_source.address == f"{wire.FEDERATION_PREFIX}.events.{link.name}"

        def queue_receiver() -> Any:
            return conn.attach_receiver(
                f"federation-fed-policy-q-queue-receiver-late.1::late.1-{NODE}:{uuid.uuid4()}",
                Terminus(kind=1, address="late.1::late.1", capabilities=["queue"]),
                Terminus(kind=2, address="late.1::late.1"), on_message=lambda m: m.accept(),
                desired_capabilities=[wire.QUEUE_RECEIVER], properties={wire.PRIORITY: -1})

        with pytest.raises(LinkRefused, match="not-found"):
            await queue_receiver()
        assert events == []
        await asyncio.to_thread(send, brokers.url("b"), "queue://late.1", ["creates it"])
        await until(lambda: len(events) == 1, "the queue-added event")
        event = Message()
        event.decode(events[0])
        assert event.annotations == {wire.EVENT_TYPE: "REQUESTED_QUEUE_ADDED_EVENT"}
        assert event.body == {"REQUESTED_ADDRESS_NAME": "late.1", "REQUESTED_QUEUE_NAME": "late.1"}
        assert (await queue_receiver()).remote_offered_capabilities == [wire.QUEUE_RECEIVER]
    finally:
        await conn.close()
