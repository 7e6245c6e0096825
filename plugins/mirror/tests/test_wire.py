"""Wire compatibility with Artemis, both directions, played exactly as the
reference (/work/shared/reference/artemis-broker-connections-wire.md) says
Artemis does it: messages are built and read with proton's codec; the links
with the outgoing AMQP client (proton's engine; link capabilities added by
RelayMQ since proton cannot send them)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from artemis_side import ARTEMIS_NODE, artemis_link, control, data_message
from mirrortools import mirror_element, receive, send
from proton import Message, symbol
from relaymq.outgoing.node import node_id
from relaymq.testing.waits import wait_until, wait_until_async
from relaymq_amqp import link_handlers
from relaymq_amqp.outgoing import LinkRefused
from relaymq_mirror import wire


async def test_artemis_mirrors_into_relaymq(brokers: Any) -> None:
    b = brokers()
    conn, sender = await artemis_link(f"tcp://{b.address}")
    try:
        # the answer: amq.mirror offered, never core tunnelling; the target's node id
        assert sender.remote_offered_capabilities == ["amq.mirror"]
        assert sender.remote_properties == {"x-opt-amq-bkr-id": node_id(b.broker),
                                            "x-opt-relaymq-prefixed-addresses": True,
                                            "x-opt-relaymq-mirror-batch": True}
        outcomes = [
            sender.send(control("addAddress", json.dumps({
                "id": 7, "name": "orders", "auto-created": False, "temporary": False,
                "internal": False, "firstSeen": 1, "routingTypes": [1], "created-timestamp": 1}),
                **{"x-opt-amq-mr-adr": "orders"})),
            sender.send(control("createQueue", json.dumps({
                "id": 8, "name": "orders", "address": "orders", "routing-type": "ANYCAST",
                "durable": True}), **{"x-opt-amq-mr-adr": "orders", "x-opt-amq-mr-qu": "orders"})),
            sender.send(control("addAddress", json.dumps({
                "id": 9, "name": "news", "routingTypes": [0], "temporary": False, "internal": False}),
                **{"x-opt-amq-mr-adr": "news"})),
            sender.send(control("createQueue", json.dumps({
                "name": "app\\.1.sub", "address": "news", "routing-type": "MULTICAST",
                "durable": True, "filter-string": "x > 1"}),
                **{"x-opt-amq-mr-adr": "news", "x-opt-amq-mr-qu": "app\\.1.sub"})),
        ]
        # data messages: long internal ids; the routing address in x-opt-amq-mr-dst or `to`
        outcomes += [sender.send(data_message(f"o{i}", 1000 + i, **{"x-opt-amq-mr-dst": "orders"}))
                     for i in range(10)]
        outcomes += [sender.send(data_message("n", 2000, address="news", properties={"x": 5}))]
        # a message that came to Artemis from a third broker, and a duplicate
        outcomes += [sender.send(data_message("third", 1000, **{"x-opt-amq-mr-dst": "orders",
                                                                "x-opt-amq-bkr-id": "third-node"}))]
        outcomes += [sender.send(data_message("o0 again", 1000, **{"x-opt-amq-mr-dst": "orders"}))]
        results = await asyncio.gather(*outcomes)
        assert [r.state for r in results] == ["accepted"] * len(results)
        assert b.depth("queue://orders") == 11  # 10 + the third broker's; the duplicate dropped
        assert b.depth("durable://app.1:sub") == 1
        # postAck: body long, queue, no broker id (the link's), then with a reason byte
        acks = [sender.send(control("postAck", 1003, **{"x-opt-amq-mr-adr": "orders",
                                                         "x-opt-amq-mr-qu": "orders"})),
                sender.send(control("postAck", 1000, **{"x-opt-amq-mr-adr": "orders",
                                                         "x-opt-amq-mr-qu": "orders",
                                                         "x-opt-amq-bkr-id": "third-node"}))]
        m = Message(body=1004, durable=True)
        from proton import byte
        m.annotations = {symbol("x-opt-amq-mr-ev-type"): symbol("postAck"),
                         symbol("x-opt-amq-mr-adr"): "orders", symbol("x-opt-amq-mr-qu"): "orders",
                         symbol("x-opt-amq-mr-ack-reason"): byte(1)}
        acks.append(sender.send(bytes(m.encode())))
        assert [r.state for r in await asyncio.gather(*acks)] == ["accepted"] * 3
        await wait_until_async(lambda: b.depth("queue://orders") == 8, "three acks applied")
        got = receive(b.url, "queue://orders", 8)
        assert sorted(x.body for x in got) == sorted(
            ["o0"] + [f"o{i}" for i in (1, 2, 5, 6, 7, 8, 9)])
        # deleteQueue / deleteAddress
        results = await asyncio.gather(
            sender.send(control("deleteQueue", "app\\.1.sub", **{"x-opt-amq-mr-adr": "news",
                                                                 "x-opt-amq-mr-qu": "app\\.1.sub"})),
            sender.send(control("deleteAddress", json.dumps({"name": "news", "routingTypes": [0]}),
                                **{"x-opt-amq-mr-adr": "news"})))
        assert [r.state for r in results] == ["accepted"] * 2
        assert not b.has("durable://app.1:sub") and not b.has("topic://news")
    finally:
        await conn.close()


class ArtemisTarget:
    """Plays Artemis' target side on a RelayMQ broker and records what comes."""

    address_prefixes = ("$ACTIVEMQ_ARTEMIS_MIRROR",)
    seen: dict[str, Any] = {}

    def __init__(self, link: Any) -> None:
        self.link = link

    def attach(self) -> None:
        link = self.link
        self.seen.update(name=link.name, target=link.remote_target.address,
                         source=link.remote_source.address, desired=link.desired_capabilities,
                         properties=link.remote_properties, container=link.remote_container,
                         open=link.remote_connection_properties,
                         snd=link.remote_snd_settle_mode, rcv=link.remote_rcv_settle_mode)
        self.seen.setdefault("messages", [])
        link.open(properties={"x-opt-amq-bkr-id": ARTEMIS_NODE}, offered_capabilities=["amq.mirror"],
                  credit=1000)

    def on_delivery(self, delivery: Any) -> None:
        data = self.link.receive(delivery)
        if data is not None:
            m = Message()
            m.decode(data)
            self.seen["messages"].append(m)
            if self.settles(m):
                self.link.accept(delivery)
            self.link.flow(1)

    def settles(self, m: Message) -> bool:
        """Whether this target accepts the event `m` (every one, here)."""
        return True

    def on_flow(self) -> None:
        pass

    def on_detach(self, closed: bool) -> None:
        pass


def test_relaymq_mirrors_into_artemis(brokers: Any) -> None:
    ArtemisTarget.seen.clear()
    b = brokers()
    b.call(lambda: link_handlers.register(b.broker, "amq.mirror", ArtemisTarget))
    # a target that does not say it reads queue:// addresses gets bare Artemis names
    a = brokers(mirrors=[mirror_element(f"tcp://{b.address}", "dc2")])
    wait_until(lambda: a.mirror_status("dc2").get("state") == "connected", "connected")
    seen = ArtemisTarget.seen
    node = node_id(a.broker)
    assert seen["name"].startswith("$ACTIVEMQ_ARTEMIS_MIRROR_dc2:")
    uuid.UUID(seen["name"].split(":", 1)[1])
    assert seen["target"] == seen["source"] == "$ACTIVEMQ_ARTEMIS_MIRROR_dc2"
    # never AMQ_CORE_MESSAGE_TUNNELING; Artemis' answer does not say it reads
    # batches, so it gets each event as its own message (below)
    assert seen["desired"] == ["amq.mirror"]
    assert seen["properties"] == {"x-opt-amq-bkr-id": node}
    assert seen["container"] == node
    assert seen["open"]["broker-connection-info"] == {"connectionName": "dc2", "nodeId": node}
    assert seen["open"]["product"] == "RelayMQ"
    assert (seen["snd"], seen["rcv"]) == (0, 0)  # unsettled, first
    send(a.url, "queue://orders", ["hello"])
    assert len(receive(a.url, "queue://orders", 1)) == 1
    wait_until(lambda: len(seen["messages"]) >= 4, "events at the target")
    msgs = seen["messages"]
    events = [(m.annotations or {}).get("x-opt-amq-mr-ev-type") for m in msgs]
    assert events[:2] == ["addAddress", "createQueue"] and events[2] is None and events[3] == "postAck"
    for m in msgs[:2] + msgs[3:4]:
        assert type(m.annotations["x-opt-amq-mr-ev-type"]) is symbol
        assert m.durable is True
    add = json.loads(msgs[0].body)
    assert add["name"] == "orders" and add["routingTypes"] == [1]
    assert msgs[0].annotations["x-opt-amq-mr-adr"] == "orders"
    created = json.loads(msgs[1].body)
    assert (created["name"], created["address"], created["routing-type"]) == ("orders", "orders",
                                                                               "ANYCAST")
    data = msgs[2]
    assert data.body == "hello"
    mr_id = data.instructions["x-opt-amq-mr-id"]
    assert type(mr_id) is int  # proton reads an AMQP long as a plain int
    assert data.instructions["x-opt-amq-mr-dst"] == "orders"
    assert "x-opt-amq-bkr-id" not in data.instructions  # originated on the source
    ack = msgs[3]
    assert ack.body == mr_id and type(ack.body) is int
    assert ack.annotations["x-opt-amq-mr-qu"] == "orders"
    assert "x-opt-amq-mr-ack-reason" not in ack.annotations  # NORMAL is left out
    assert "x-opt-amq-bkr-id" not in ack.annotations


async def test_bad_input_on_the_target(brokers: Any) -> None:
    b = brokers()
    # a $ACTIVEMQ_ARTEMIS_MIRROR link without amq.mirror: refused with the reason
    with pytest.raises(LinkRefused, match="must desire the capability amq.mirror"):
        await artemis_link(f"tcp://{b.address}", caps=[])
    with pytest.raises(LinkRefused, match="x-opt-amq-bkr-id"):
        await artemis_link(f"tcp://{b.address}", bkr_id=None)
    with pytest.raises(LinkRefused, match="cannot mirror to itself"):
        await artemis_link(f"tcp://{b.address}", bkr_id=node_id(b.broker))
    conn, sender = await artemis_link(f"tcp://{b.address}")
    try:
        wrong_type = Message(body="x", durable=True)
        wrong_type.annotations = {symbol("x-opt-amq-mr-ev-type"): "postAck"}  # a string
        no_long = data_message("x", "not-a-long", **{"x-opt-amq-mr-dst": "q"})
        ok = data_message("fine", 5, **{"x-opt-amq-mr-dst": "q"})
        unknown_ack = control("postAck", 999999, **{"x-opt-amq-mr-adr": "q", "x-opt-amq-mr-qu": "q"})
        # sound up to its annotations, then a section of an unknown type: only the
        # message's own decoding (once, by the kernel mapping) finds it
        broken = data_message("x", 6, **{"x-opt-amq-mr-dst": "q"}) + b"\x00\x53\x77\xff"
        r = await asyncio.gather(sender.send(bytes(wrong_type.encode())), sender.send(no_long),
                                 sender.send(ok), sender.send(unknown_ack), sender.send(broken))
        assert [x.state for x in r] == ["rejected", "rejected", "accepted", "accepted", "rejected"]
        assert "must be a symbol" in str(r[0].condition)
        assert "must be a long" in str(r[1].condition)
        assert "cannot be read" in str(r[4].condition)
        assert b.depth("queue://q") == 1  # nothing else affected
        # an event the kernel refuses (a queue without a name): that event is
        # rejected with the kernel's reason, the link goes on (the compiled target
        # once failed the whole link on anything but its own BadEvent)
        nameless = control("deleteQueue", None, **{"x-opt-amq-mr-adr": "", "x-opt-amq-mr-qu": ""})
        after = data_message("after", 7, **{"x-opt-amq-mr-dst": "q"})
        r = await asyncio.gather(sender.send(nameless), sender.send(after))
        assert [x.state for x in r] == ["rejected", "accepted"], r
        assert "must not be empty" in str(r[0].condition)
        assert b.depth("queue://q") == 2
        send(b.url, "queue://plain", ["still fine"])
        assert b.depth("queue://plain") == 1
    finally:
        await conn.close()


async def test_relaymq_layout_and_artemis_layout_on_one_link(brokers: Any) -> None:
    """A RelayMQ source's messages and postAcks (read by the target at fixed places)
    and Artemis' (proton's encoding, read section by section) on one link, in any
    mix: a postAck of one layout removes a message of the other, a repeat is
    dropped whichever layout it comes in, the mirror's annotations never reach a
    consumer, and whatever does not match the layout exactly (a broken body, a
    truncated postAck, a message whose annotations name an event) is read the
    general way, with its usual outcome."""
    b = brokers()
    conn, sender = await artemis_link(f"tcp://{b.address}")
    try:
        plain = [Message(body=f"r{i}", durable=True, id=f"ID:relaymq-{i}",
                         properties={"n": i}) for i in range(4)]
        relaymq = [wire.with_mirror_annotations(bytes(m.encode()), 3000 + i,
                                                "node-r" if i % 2 else None, "queue://mix")
                   for i, m in enumerate(plain)]
        artemis = [data_message(f"a{i}", 4000 + i, **{"x-opt-amq-mr-dst": "mix"}) for i in range(4)]
        repeat = wire.with_mirror_annotations(bytes(plain[0].encode()), 4000, None, "queue://mix")
        broken = wire.with_mirror_annotations(bytes(plain[0].encode()) + b"\x00\x53\x77\xff",
                                              3100, None, "queue://mix")
        r = await asyncio.gather(*(sender.send(x) for x in [*relaymq, *artemis, repeat, broken]))
        assert [x.state for x in r] == ["accepted"] * 9 + ["rejected"]
        assert "cannot be read" in str(r[9].condition)
        assert b.depth("queue://mix") == 8  # the repeat of a4000 dropped

        acks = [
            wire.post_ack("queue://mix", "mix", 4000, None, wire.NORMAL),  # an Artemis message
            wire.post_ack("queue://mix", "mix", 3001, "node-r", wire.EXPIRED),
            control("postAck", 3000, **{"x-opt-amq-mr-adr": "queue://mix", "x-opt-amq-mr-qu": "mix"}),
            wire.post_ack("queue://mix", "mix", 4001, "node-x", wire.NORMAL)[:-3],  # truncated
        ]
        r = await asyncio.gather(*(sender.send(x) for x in acks))
        assert [x.state for x in r] == ["accepted", "accepted", "accepted", "rejected"]
        assert b.depth("queue://mix") == 5

        # the layout of a RelayMQ message, whose own annotations name an event: an event
        named = Message(body="{}", durable=True)
        named.annotations = {symbol("x-opt-amq-mr-ev-type"): symbol("noSuchEvent")}
        odd = wire.with_mirror_annotations(bytes(named.encode()), 3200, None, "queue://mix")
        (res,) = await asyncio.gather(sender.send(odd))
        assert res.state == "rejected" and "noSuchEvent" in str(res.condition)
    finally:
        await conn.close()
    got = receive(b.url, "queue://mix", 5)
    assert sorted(m.body for m in got) == ["a1", "a2", "a3", "r2", "r3"]
    for m in got:
        assert not m.instructions  # no mirror delivery annotations
        assert not any(str(k).startswith("x-opt-amq-mr") for k in (m.annotations or {}))
    assert {m.body: m.properties for m in got}["r3"] == {"n": 3}


@pytest.mark.parametrize("origin", [None, "node-1", "n" * 300])
@pytest.mark.parametrize("reason", [wire.NORMAL, wire.EXPIRED])
def test_post_ack_reads_as_the_generic_encoding(origin: str | None, reason: int) -> None:
    """The hand-written postAck decodes (proton) to what the generic encoder writes."""
    from proton import Message as PMessage
    from relaymq_amqp.types import Byte, Long

    ann: dict[str, Any] = {wire.ADDRESS: "queue://orders", wire.QUEUE: "q" * 260,
                           wire.BROKER_ID: origin}
    if reason != wire.NORMAL:
        ann[wire.ACK_REASON] = Byte(reason)
    generic = wire.control(wire.POST_ACK, ann, Long(2**40 + 7))
    fast = wire.post_ack("queue://orders", "q" * 260, 2**40 + 7, origin, reason)
    a, b = PMessage(), PMessage()
    a.decode(generic)
    b.decode(fast)
    assert b.annotations == a.annotations
    assert b.body == a.body == 2**40 + 7
    assert b.durable and a.durable
    inc = wire.Incoming(fast)
    assert inc.event == wire.POST_ACK and inc.ack_id() == 2**40 + 7
    assert inc.ack_reason() == reason
    assert inc.string(wire.QUEUE) == "q" * 260
    read = wire.read_post_ack(fast)  # the target's reading at fixed places
    assert read is not None
    general = wire.post_ack_of(inc)
    assert (read.address, read.queue, read.ident, read.reason) == (
        general.address, general.queue, general.ident, general.reason)


class HoldingTarget(ArtemisTarget):
    """An Artemis target of its own node id that records every event and leaves
    postAcks unsettled (so the source keeps them in its store-and-forward cursor)."""

    node = str(uuid.uuid4())
    seen: dict[str, Any] = {}

    def attach(self) -> None:
        self.seen.setdefault("messages", [])
        self.link.open(properties={"x-opt-amq-bkr-id": self.node},
                       offered_capabilities=["amq.mirror"], credit=1000)

    def settles(self, m: Message) -> bool:
        return (m.annotations or {}).get("x-opt-amq-mr-ev-type") != "postAck"


async def test_an_acknowledgement_read_back_keeps_the_artemis_internal_id(
        brokers: Any, tmp_path: Any) -> None:
    """Artemis -> RelayMQ B -> another Artemis: a message keeps the internal id its
    Artemis origin gave it (a journal id, not derived from its message id), also in
    B's postAck when B reads the acknowledgement back from its store (here: after
    a restart, the postAck not yet settled by the target)."""
    HoldingTarget.seen.clear()
    t = brokers()
    t.call(lambda: link_handlers.register(t.broker, "amq.mirror", HoldingTarget))
    mirrors = [mirror_element(f"tcp://{t.address}", "dc3")]
    b = brokers(store=tmp_path / "b", mirrors=mirrors)
    conn, sender = await artemis_link(f"tcp://{b.address}")
    try:
        sent = await sender.send(data_message("from artemis", 4242, **{"x-opt-amq-mr-dst": "orders"}))
        assert sent.state == "accepted"
    finally:
        await conn.close()
    assert [m.body for m in receive(b.url, "queue://orders", 1)] == ["from artemis"]

    def seen(event: str | None) -> list[Any]:
        return [m for m in HoldingTarget.seen.get("messages", [])
                if (m.annotations or {}).get("x-opt-amq-mr-ev-type") == event]

    await wait_until_async(lambda: len(seen("postAck")) == 1, "the postAck at the target")
    assert [m.instructions["x-opt-amq-mr-id"] for m in seen(None)] == [4242]
    b.stop()
    brokers(store=tmp_path / "b", mirrors=mirrors)  # B again, on its store
    await wait_until_async(lambda: len(seen("postAck")) == 2,
                           "the unsettled postAck sent again after B's restart")
    assert [m.body for m in seen("postAck")] == [4242, 4242]
    assert all(m.annotations["x-opt-amq-bkr-id"] == ARTEMIS_NODE for m in seen("postAck"))
