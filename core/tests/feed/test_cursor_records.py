"""The stored form of durable-cursor records: a `MessageAdded` record is the
message itself (stored once, not wrapped), and records written in the earlier
wrapped form are still read back."""

from __future__ import annotations

import json

import pytest
from relaymq.feed import MessageAdded, MessageRemoved
from relaymq.feed.constructors import added, removed
from relaymq.feed.cursor import FEED_FIELD, REMOVED_TYPE, decode_event, encode_event, shared_record
from relaymq.model.codec import decode_message, encode_message
from relaymq.model.destination import Destination
from relaymq.model.message import Message


def stored(record: Message) -> Message:
    """What a store gives back: the record through the stored-message codec."""
    return decode_message(encode_message(record))


def test_a_message_added_record_is_the_message_and_reads_back_equal() -> None:
    q = Destination.queue("rec.q")
    msg = Message(b"x" * 1024, destination=q, message_id="ID:1", durable=False,
                  properties={"n": 7}, annotations={"a": "b"}, origin="peer-1")
    ev = added(msg, q, (("queue://rec.q", 42),), "peer-1")
    record = encode_event(ev)
    assert record.body is msg.body  # shared, not copied into a wrapper
    assert record.durable is True and FEED_FIELD in record.annotations
    assert msg.annotations == {"a": "b"} and msg.durable is False  # the original is untouched
    back = decode_event(stored(record))
    assert type(back) is MessageAdded
    assert back.placements == (("queue://rec.q", 42),) and back.destination == q
    assert back.origin == "peer-1"
    m = back.message
    assert (m.body, m.message_id, m.durable, m.properties, m.annotations, m.origin) == (
        msg.body, "ID:1", False, {"n": 7}, {"a": "b"}, "peer-1")


def test_several_placements_and_none() -> None:
    t = Destination.topic("rec.t")
    msg = Message(b"t", destination=t, message_id="ID:2", durable=True)
    many = (("durable://c:a", 3), ("durable://c:b", 9))
    for placements in (many, ()):
        record = stored(encode_event(added(msg, t, placements, None)))
        back = decode_event(record)
        assert back.placements == placements and back.message.annotations is None
        assert decode_event(record).placements == placements  # the record itself is unchanged


def test_a_shared_record_is_the_message_itself_when_it_says_the_rest() -> None:
    q = Destination.queue("rec.share")
    msg = Message(b"s" * 64, destination=q, message_id="ID:7", durable=True,
                  properties={"feed": "not a record"}, annotations={"a": 1}, origin="peer-2")
    ev = added(msg, q, (("queue://rec.share", 8),), "peer-2")
    assert shared_record(ev) is msg  # not even a copy: the queue's store op has it
    back = decode_event(stored(msg))
    assert type(back) is MessageAdded and back.destination == q and back.origin == "peer-2"
    assert back.placements == ()  # the one thing a shared record does not say
    m = back.message
    assert (m.body, m.message_id, m.durable, m.properties, m.annotations, m.origin) == (
        msg.body, "ID:7", True, {"feed": "not a record"}, {"a": 1}, "peer-2")
    # what the message does not say itself: a record of its own (the wrapped form)
    for other in (
            added(Message(b"", destination=q, message_id="ID:8", durable=False), q, (), None),
            added(Message(b"", destination=q, message_id="ID:9", durable=True), q, (), "peer-3"),
            added(Message(b"", destination=q, message_id="ID:10", durable=True), Destination.queue("x"),
                  (), None),
            added(Message(b"", destination=None, message_id="ID:11", durable=True), q, (), None),
            added(Message(b"", destination=q, durable=True, type=REMOVED_TYPE), q, (), None),
            added(Message(b"", destination=q, durable=True, annotations={FEED_FIELD: "{}"}), q,
                  ((q.key, 1),), None)):
        record = shared_record(other)
        assert record is not other.message and FEED_FIELD in record.annotations
        again = decode_event(stored(record))
        assert (again.destination, again.origin, again.placements) == (
            other.destination, other.origin, other.placements)
        assert again.message.durable == other.message.durable


def test_records_of_the_earlier_wrapped_form_are_read() -> None:
    q = Destination.queue("rec.old")
    msg = Message(b"old", destination=q, message_id="ID:3", durable=True)
    fields = {"k": MessageAdded.kind, "o": None, "d": q.key, "p": [["queue://rec.old", 5]]}
    legacy = Message(encode_message(msg), durable=True, properties={"feed": json.dumps(fields)})
    back = decode_event(stored(legacy))
    assert type(back) is MessageAdded and back.placements == (("queue://rec.old", 5),)
    assert back.message.body == b"old" and back.message.message_id == "ID:3"
    rem = decode_event(stored(encode_event(removed(msg, q, "queue://rec.old", 5, "acked", "p"))))
    assert type(rem) is MessageRemoved and (rem.seq, rem.reason, rem.origin) == (5, "acked", "p")
    old = {"k": MessageRemoved.kind, "o": "p", "d": q.key, "key": "queue://rec.old", "seq": 6,
           "r": "expired", "id": "ID:3", "durable": True}
    rem = decode_event(stored(Message(b"", durable=True, properties={"feed": json.dumps(old)})))
    assert type(rem) is MessageRemoved and (rem.seq, rem.reason, rem.origin) == (6, "expired", "p")
    assert rem.message.message_id == "ID:3" and rem.destination == q


def test_a_message_removed_record_has_no_properties_and_reads_back_equal() -> None:
    q = Destination.queue("rec.rm")
    msg = Message(b"gone", destination=q, message_id="ID:4", durable=False, origin="broker-c")
    record = encode_event(removed(msg, q, "durable://c:s", 17, "killed", None))
    assert record.properties == {} and record.annotations is None
    rem = decode_event(stored(record))
    assert type(rem) is MessageRemoved and rem.destination == q and rem.key == "durable://c:s"
    assert (rem.seq, rem.reason, rem.origin) == (17, "killed", None)
    assert (rem.message.message_id, rem.message.durable) == ("ID:4", False)
    assert rem.message.origin == "broker-c"  # a mirror names the broker it came from


def test_a_message_removed_record_keeps_the_message_annotations() -> None:
    """A mirrored message's internal id on its origin (an Artemis journal id, not
    derived from its message id) is a broker annotation: an acknowledgement read
    back from the store must still carry it, or the postAck names another message."""
    q = Destination.queue("rec.ann")
    ann = {"mirror_id": 2**40 + 3, "raw": b"\x00\x01", "note": "x"}
    msg = Message(b"gone", destination=q, message_id="ID:5", durable=True, annotations=ann)
    rem = decode_event(stored(encode_event(removed(msg, q, "queue://rec.ann", 3, "acked", None))))
    assert rem.message.annotations == ann
    plain = Message(b"", destination=q, message_id="ID:6", durable=True)
    rem = decode_event(stored(encode_event(removed(plain, q, "queue://rec.ann", 4, "acked", None))))
    assert rem.message.annotations is None


@pytest.mark.parametrize("mid", ["ID:7", None, "", "id\x1fwith\x1eseparators"])
@pytest.mark.parametrize("origin", [None, "", "peer"])
def test_a_message_removed_record_is_compact_text_and_reads_back_equal(
        mid: str | None, origin: str | None) -> None:
    """Its fields as text after a marker byte, no JSON (a field that holds the
    separators falls back to the earlier JSON list); every field comes back,
    None and the empty string told apart."""
    q = Destination.queue("rec.compact")
    ann = {"mirror_id": 2**40 + 9, "note": "tab\x1f"}
    for durable in (True, False):
        for kept in (None, ann):
            msg = Message(b"gone", destination=q, message_id=mid, durable=durable,
                          origin=origin, annotations=kept)
            record = encode_event(removed(msg, q, "queue://rec.compact", 21, "expired", origin))
            assert record.type == REMOVED_TYPE and record.properties == {}
            compact = mid is None or "\x1f" not in mid
            assert record.body[:1] == (b"\x1e" if compact else b"[")
            rem = decode_event(stored(record))
            assert type(rem) is MessageRemoved and rem.destination == q
            assert (rem.key, rem.seq, rem.reason, rem.origin) == ("queue://rec.compact", 21,
                                                                   "expired", origin)
            m = rem.message
            assert (m.message_id, m.durable, m.origin, m.annotations) == (mid, durable, origin, kept)


def test_a_message_removed_record_of_the_json_form_is_read() -> None:
    """What cursors wrote before the compact form: a JSON list in the body."""
    q = Destination.queue("rec.old")
    fields = ["peer", "queue://rec.old", "queue://rec.old", 5, "acked", "ID:old", True, "broker-b",
              {"mirror_id": 77}]
    rem = decode_event(stored(Message(json.dumps(fields).encode(), durable=True, type=REMOVED_TYPE)))
    assert type(rem) is MessageRemoved and rem.destination == q
    assert (rem.key, rem.seq, rem.reason, rem.origin) == ("queue://rec.old", 5, "acked", "peer")
    assert (rem.message.message_id, rem.message.origin, rem.message.annotations) == (
        "ID:old", "broker-b", {"mirror_id": 77})
    short = decode_event(stored(Message(json.dumps(fields[:7]).encode(), durable=True,
                                        type=REMOVED_TYPE)))
    assert short.message.origin is None and short.message.annotations is None


@pytest.mark.parametrize("early", [False, True], ids=["after-store", "read-early"])
async def test_a_spilled_cursor_reads_ahead_and_keeps_order_while_more_arrives(monkeypatch, early) -> None:  # type: ignore[no-untyped-def]
    """Small window and pages: the backlog spills to the store; the next page is
    read ahead while the reader works and more events keep coming. Every event
    arrives once, in order; acknowledged ones are gone (also when events are
    handed out as they are captured, `read_early`)."""
    import asyncio

    from relaymq.broker.broker import Broker
    from relaymq.broker.security import ConnectRequest
    from relaymq.config.model import BrokerConfig
    from relaymq.feed import cursor as cursor_mod

    monkeypatch.setattr(cursor_mod, "WINDOW", 40)
    monkeypatch.setattr(cursor_mod, "PAGE", 16)
    monkeypatch.setattr(cursor_mod, "PREFETCH_AT", 8)
    broker = Broker(BrokerConfig(persistent=False))
    await broker.start()
    try:
        cur = await broker.change_feed.subscribe_durable("spill", {MessageAdded})
        cur.read_early = early
        conn = await broker.connect(ConnectRequest())
        q = Destination.queue("rec.spill")
        for i in range(300):
            await conn.send(Message(f"{i}".encode(), destination=q, durable=True))
        deadline = asyncio.get_running_loop().time() + 5
        while cur.pending < 300:  # stored, mostly only in the store (window 40)
            assert asyncio.get_running_loop().time() < deadline, cur.pending
            await asyncio.sleep(0.01)
        got: list[int] = []
        nxt = 300
        while len(got) < 600:
            ev = await asyncio.wait_for(cur.get(), 5)
            got.append(int(ev.message.body))
            if nxt < 600:  # more arrive while the backlog drains
                await conn.send(Message(f"{nxt}".encode(), destination=q, durable=True))
                nxt += 1
            if len(got) % 50 == 0:
                await cur.ack()
        assert got == list(range(600))
        await cur.ack()
        assert cur.pending == 0 and cur.unacknowledged == 0
        assert await broker.store.read(cur.key, 0, 10) == []
    finally:
        await broker.stop()


async def test_take_hands_out_what_is_in_memory_in_order_without_waiting() -> None:
    import asyncio

    from relaymq.broker.broker import Broker
    from relaymq.broker.security import ConnectRequest
    from relaymq.config.model import BrokerConfig

    broker = Broker(BrokerConfig(persistent=False))
    await broker.start()
    try:
        cur = await broker.change_feed.subscribe_durable("take", {MessageAdded})
        assert cur.take(10) == []  # nothing yet: no wait either
        conn = await broker.connect(ConnectRequest())
        q = Destination.queue("rec.take")
        for i in range(5):
            await conn.send(Message(f"{i}".encode(), destination=q, durable=True))
        deadline = asyncio.get_running_loop().time() + 5
        while cur.pending < 5:
            assert asyncio.get_running_loop().time() < deadline, cur.pending
            await asyncio.sleep(0.01)
        first = cur.take(3)
        rest = cur.take(10)
        assert [int(ev.message.body) for _, ev in first + rest] == [0, 1, 2, 3, 4]
        seqs = [seq for seq, _ in first + rest]
        assert seqs == sorted(seqs) and cur.position == seqs[-1]
        assert cur.take(10) == [] and cur.unacknowledged == 5
        await cur.ack(seqs[2])
        assert cur.unacknowledged == 2
    finally:
        await broker.stop()


async def test_read_early_hands_out_events_while_their_store_write_is_under_way() -> None:
    """`read_early`: a captured event can be taken before the store write that
    holds it completes; `stored_upto` stays below it (a reader must not forget it
    yet) until the write completes, and `on_stored` then says so."""
    import asyncio

    from relaymq.broker.broker import Broker
    from relaymq.broker.security import ConnectRequest
    from relaymq.config.model import BrokerConfig

    broker = Broker(BrokerConfig(persistent=False))
    await broker.start()
    try:
        cur = await broker.change_feed.subscribe_durable("early", {MessageAdded})
        cur.read_early = True
        stored: list[int] = []
        cur.on_stored = stored.append
        conn = await broker.connect(ConnectRequest())
        q = Destination.queue("rec.early")
        await conn.send(Message(b"0", destination=q, durable=True))  # the buffer is in step now
        first = await asyncio.wait_for(cur.get(), 5)
        assert int(first.message.body) == 0  # type: ignore[attr-defined]
        before = cur.stored_upto
        gate = asyncio.Event()
        store = broker.store
        write = store.write

        async def held(ops):  # type: ignore[no-untyped-def]
            await gate.wait()
            return await write(ops)

        store.write = held
        try:
            sends = [asyncio.ensure_future(conn.send(Message(f"{i}".encode(), destination=q,
                                                             durable=True))) for i in (1, 2)]
            deadline = asyncio.get_running_loop().time() + 5
            got: list[tuple[int, object]] = []
            while len(got) < 2:
                assert asyncio.get_running_loop().time() < deadline, got
                await asyncio.sleep(0.01)
                got += cur.take(10)
            assert [int(ev.message.body) for _, ev in got] == [1, 2]  # type: ignore[attr-defined]
            assert cur.stored_upto == before and stored == [before]
            gate.set()
            await asyncio.wait_for(asyncio.gather(*sends), 5)
        finally:
            store.write = write
        assert cur.stored_upto == got[-1][0] and stored[-1] == got[-1][0]
        await cur.ack(cur.stored_upto)
        assert cur.unacknowledged == 0
    finally:
        await broker.stop()
