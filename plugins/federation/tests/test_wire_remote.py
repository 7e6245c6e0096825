"""Remote policies on the wire: this test plays an Artemis source -- it opens the
control link, sends ``ADD_ADDRESS_POLICY`` and serves the links the broker then
attaches back over the same connection (a `relaymq run` broker has the
consumer) -- and checks the receiver's attach against Artemis' shape (see
shared/reference/artemis-broker-connections-wire.md, 4.4)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from fed_artemis_side import NODE, artemis, control_link, until
from fedtools import Brokers, client, receive_all, wait_for_log
from proton import Message
from relaymq_amqp import engine as pn
from relaymq_amqp import link_handlers
from relaymq_federation import wire
from relaymq_federation.config import AddressPolicy
from relaymq_federation.hops import max_hops_selector
from relaymq_federation.operation import policy_command


class _Side:
    """What link handlers need of a broker: its extensions (the handler table)."""

    def __init__(self) -> None:
        self.extensions: dict[str, Any] = {}
        self.plugins = None


class ArtemisAddressSender:
    """The source's side of the broker's address receiver, as Artemis answers it."""

    address_prefixes: ClassVar[tuple[str, ...]] = ()
    attached: ClassVar[list[ArtemisAddressSender]] = []

    def __init__(self, link: Any) -> None:
        self.link = link
        self.outcomes: list[int] = []

    def attach(self) -> None:
        self.link.open(offered_capabilities=[wire.ADDRESS_RECEIVER],
                       snd_settle_mode=pn.SND_UNSETTLED, rcv_settle_mode=pn.RCV_FIRST)
        ArtemisAddressSender.attached.append(self)

    def on_delivery(self, d: Any) -> None:
        state = pn.delivery_remote_state(d)
        if state:
            self.outcomes.append(state)
            pn.delivery_settle(d)

    def on_flow(self) -> None:
        pass

    def on_detach(self, closed: bool) -> None:
        pass


async def test_the_broker_attaches_artemis_address_receivers_for_a_remote_policy(
        brokers: Brokers) -> None:
    brokers.start("b")
    side = _Side()
    link_handlers.register(side, wire.ADDRESS_RECEIVER, ArtemisAddressSender)
    ArtemisAddressSender.attached.clear()
    conn = await artemis(brokers)
    conn.serve_peer_links(side)
    try:
        with client(brokers.url("b")) as cb:
            sub = cb.create_receiver("topic://news.eu", credit=10)
            control = await control_link(conn)
            policy = AddressPolicy("back", ["news.#"], [], 2, auto_delete=True, auto_delete_delay=1000,
                                   auto_delete_message_count=-1)
            assert (await control.send(policy_command(wire.ADD_ADDRESS_POLICY, policy.to_map()))).accepted
            await until(lambda: ArtemisAddressSender.attached, "the broker's address receiver")
            peer = ArtemisAddressSender.attached[0].link
            b_node = peer.remote_container
            assert b_node and b_node != NODE
            # Artemis' version 2 names: the link, and the FQQN of the queue on this side
            assert peer.name.startswith(f"federation-fed-policy-back-address-receiver-news.eu-{b_node}-")
            assert not peer.peer_sends  # the broker receives
            source = peer.remote_source
            assert source.address == f"news.eu::federation.fed.policy.back.address.news.eu.node.{b_node}"
            assert source.capabilities == ["topic"]
            assert source.expiry_policy == pn.EXPIRE_WITH_LINK
            filters = {str(k): v for k, v in source.filter.items()}
            assert filters[wire.NO_LOCAL_KEY].descriptor == wire.NO_LOCAL_CODE
            assert filters[wire.SELECTOR_KEY].descriptor == wire.SELECTOR_CODE
            assert filters[wire.SELECTOR_KEY].value == max_hops_selector(2)
            assert peer.remote_target.address == "news.eu"
            assert peer.desired_capabilities == [wire.ADDRESS_RECEIVER]
            assert peer.remote_properties[wire.POLICY_NAME] == "back"
            props = {str(k): v for k, v in peer.remote_properties[wire.ADDRESS_SOURCE_PROPERTIES].items()}
            assert props == {"auto-delete": True, "auto-delete-delay": 1000, "auto-delete-msg-count": -1}
            # a message the source sends arrives at the broker's consumer, and is accepted
            await until(lambda: peer.credit > 0, "credit from the broker's receiver")
            handler = ArtemisAddressSender.attached[0]
            peer.send(bytes(Message(body="from artemis").encode()), 1)
            assert await asyncio.to_thread(receive_all, sub, 1) == ["from artemis"]
            await until(lambda: handler.outcomes, "the broker's outcome")
            assert handler.outcomes == [pn.ACCEPTED]
    finally:
        await conn.close()


class OldArtemisAddressSender(ArtemisAddressSender):
    """A source that serves the link but does not offer the receiver capability."""

    attached: ClassVar[list[ArtemisAddressSender]] = []
    detached: ClassVar[list[str]] = []

    def attach(self) -> None:
        self.link.open(snd_settle_mode=pn.SND_UNSETTLED, rcv_settle_mode=pn.RCV_FIRST)
        OldArtemisAddressSender.attached.append(self)

    def on_detach(self, closed: bool) -> None:
        OldArtemisAddressSender.detached.append(self.link.name)


async def test_a_remote_policy_is_refused_when_the_peer_does_not_offer_the_receiver_capability(
        brokers: Brokers) -> None:
    brokers.start("b")
    side = _Side()
    link_handlers.register(side, wire.ADDRESS_RECEIVER, OldArtemisAddressSender)
    OldArtemisAddressSender.attached.clear()
    OldArtemisAddressSender.detached.clear()
    conn = await artemis(brokers)
    conn.serve_peer_links(side)
    try:
        with client(brokers.url("b")) as cb:
            cb.create_receiver("topic://news.eu", credit=10)
            control = await control_link(conn)
            policy = AddressPolicy("back", ["news.#"], [], 2)
            assert (await control.send(policy_command(wire.ADD_ADDRESS_POLICY, policy.to_map()))).accepted
            # the broker tries once, finds no capability on the answer and closes its receiver
            await until(lambda: OldArtemisAddressSender.detached, "the broker closing its receiver")
            assert len(OldArtemisAddressSender.attached) == 1
            await asyncio.to_thread(wait_for_log, brokers, "b",
                                    f"refused: the peer does not offer {wire.ADDRESS_RECEIVER}")
            # more demand and a second policy open nothing more; the control link stays usable
            cb.create_receiver("topic://news.us", credit=10)
            second = AddressPolicy("again", ["news.us"], [], 1)
            assert (await control.send(policy_command(wire.ADD_ADDRESS_POLICY, second.to_map()))).accepted
            await asyncio.to_thread(wait_for_log, brokers, "b", "applying address policy 'again'")
            assert len(OldArtemisAddressSender.attached) == 1
            assert brokers.logs().count(f"does not offer {wire.ADDRESS_RECEIVER}") == 1
            assert not control.closed
    finally:
        await conn.close()
