"""Duplicate detection (`_AMQ_DUPL_ID`) in the kernel, through the embedded client."""

from __future__ import annotations

import pytest
from relaymq.config.model import BrokerConfig
from relaymq.errors import MessageFormatError, TransactionError
from relaymq.testing.barriers import before_marker

from .conftest import policy

DUP = "_AMQ_DUPL_ID"


async def test_second_send_with_same_id_is_dropped_and_counted(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("queue://D", "first", properties={DUP: "id-1"})
    await p.send("queue://D", "again", properties={DUP: "id-1"})  # acknowledged, dropped
    await p.send("queue://D", "other", properties={DUP: "id-2"})
    c = await p.consumer("queue://D")
    got = await before_marker(p, "queue://D", c)
    assert got == ["first", "other"]
    assert b.destination_stats()["queue://D"]["duplicates"] == 1
    info = await b.management.destination("queue://D")
    assert info.duplicates == 1 and info.enqueued == 3  # first, other and the marker


async def test_ids_are_per_address_and_typed(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("queue://A", "a", properties={DUP: "x"})
    await p.send("queue://B", "b", properties={DUP: "x"})  # another address
    await p.send("queue://A", "bin", properties={DUP: b"x"})  # binary is not the string
    await p.send("queue://A", "bin again", properties={DUP: b"x"})
    ca = await p.consumer("queue://A")
    cb = await p.consumer("queue://B")
    assert await before_marker(p, "queue://A", ca) == ["a", "bin"]
    assert await before_marker(p, "queue://B", cb) == ["b"]


async def test_unsupported_id_type_fails_only_that_send(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    with pytest.raises(MessageFormatError, match="string or a binary"):
        await p.send("queue://T", "bad", properties={DUP: 42})
    await p.send("queue://T", "good", properties={DUP: "42"})
    c = await p.consumer("queue://T")
    assert await before_marker(p, "queue://T", c) == ["good"]


async def test_full_cache_forgets_oldest(make_broker, connect):
    b = await make_broker(BrokerConfig(persistent=False, policy_entries=[
        policy(queue="SMALL", id_cache_size=3)]))
    p = await connect(b)
    for i in range(4):
        await p.send("queue://SMALL", f"m{i}", properties={DUP: f"id-{i}"})
    await p.send("queue://SMALL", "id-0 again", properties={DUP: "id-0"})  # evicted: accepted
    await p.send("queue://SMALL", "id-3 again", properties={DUP: "id-3"})  # still held: dropped
    c = await p.consumer("queue://SMALL")
    assert await before_marker(p, "queue://SMALL", c) == ["m0", "m1", "m2", "m3", "id-0 again"]


async def test_duplicate_inside_transaction_fails_commit_and_applies_nothing(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    await p.send("queue://TX", "before", properties={DUP: "seen"})
    p.begin()
    await p.send("queue://TX", "new in tx", properties={DUP: "fresh"})
    await p.send("queue://TX", "dup in tx", properties={DUP: "seen"})
    with pytest.raises(TransactionError, match="Duplicate message detected"):
        await p.commit()
    # nothing of the transaction was applied, and its new id was forgotten
    await p.send("queue://TX", "fresh now", properties={DUP: "fresh"})
    c = await p.consumer("queue://TX")
    assert await before_marker(p, "queue://TX", c) == ["before", "fresh now"]


async def test_rolled_back_ids_can_be_sent_again(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    p.begin()
    await p.send("queue://RB", "rolled back", properties={DUP: "r"})
    p.rollback()
    await p.send("queue://RB", "kept", properties={DUP: "r"})
    c = await p.consumer("queue://RB")
    assert await before_marker(p, "queue://RB", c) == ["kept"]


async def test_topic_address_and_composite_parts(make_broker, connect):
    b = await make_broker()
    p = await connect(b)
    c = await p.consumer("topic://T")
    await p.send("topic://T", "t1", properties={DUP: "k"})
    await p.send("topic://T", "t2", properties={DUP: "k"})
    assert await before_marker(p, "topic://T", c) == ["t1"]
    await p.send("queue://C1,queue://C2", "both", properties={DUP: "c"})
    await p.send("queue://C2", "c2 dup", properties={DUP: "c"})
    c2 = await p.consumer("queue://C2")
    assert await before_marker(p, "queue://C2", c2) == ["both"]
    assert b.destination_stats()["topic://T"]["duplicates"] == 1


async def test_an_id_given_beside_the_message_is_checked_and_not_added_to_it(make_broker):
    """What a mirror target does (`submit(message, None, id)`): the id is checked
    and recorded as `_AMQ_DUPL_ID` would be, and the message's properties stay as
    they came (nothing to parse or store)."""
    from relaymq.broker.security import ConnectRequest
    from relaymq.model.destination import Destination
    from relaymq.model.message import Message

    b = await make_broker()
    conn = await b.connect(ConnectRequest())
    q = Destination.queue("BESIDE")
    for body, beside, props in ((b"first", "m-1", {"n": 1}), (b"again", "m-1", {"n": 2}),
                                (b"as a property", None, {DUP: "m-1"}), (b"other", "m-2", {})):
        stored = await conn.submit(Message(body, destination=q, durable=True, properties=props),
                                   None, beside)
        if stored is not None:
            await stored
    held = [e.message for e in b.region.queues[q].memory_entries()]
    assert [(m.body, m.properties) for m in held] == [(b"first", {"n": 1}), (b"other", {})]
    info = await b.management.destination("queue://BESIDE")
    assert info.duplicates == 2
