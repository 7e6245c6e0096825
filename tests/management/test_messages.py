"""Management of messages through `broker.management`, with real STOMP and AMQP
clients on a kahaDB broker: paged browsing of a large backlog from the store,
purge that survives a restart, retrying a dead-lettered message, moving by selector."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Message as AmqpMessage
from proton import symbol
from proton.utils import BlockingConnection
from relaymq.testing.waits import wait_until

from .conftest import stomp_client, wait_receipt


def send_backlog(broker: Any, queue: str, n: int) -> None:
    conn, inbox = stomp_client(broker.stomp)
    for i in range(n):
        headers = {"persistent": "true", "n": str(i), "bucket": str(i % 100)}
        if i == n - 1:
            headers["receipt"] = "last"
        conn.send(f"/queue/{queue}", f"message {i}", headers=headers)
    wait_receipt(inbox, "last")
    conn.disconnect()


@pytest.mark.slow
def test_browse_a_100000_message_kahadb_backlog_in_pages(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    n = 100_000
    send_backlog(broker, "BACKLOG", n)
    info = broker.run(m.destination("BACKLOG"))
    assert info.depth == n
    # most of the backlog is only in the store (storeCursorMemoryLimit="256 kb")
    assert info.memory_used < 1 << 20
    seen: list[int] = []
    ids: set[str | None] = set()
    after, pages = 0, 0
    while True:
        page = broker.run(m.browse("BACKLOG", after=after, limit=5000))
        seen.extend(int(msg.properties["n"]) for msg in page.messages)
        ids.update(msg.message_id for msg in page.messages)
        pages += 1
        if page.done:
            break
        after = page.next_after
    assert seen == list(range(n))
    assert len(ids) == n
    assert pages >= 20
    # browsing consumed nothing
    assert broker.run(m.destination("BACKLOG")).depth == n
    # a selector filters while paging through the store (STOMP headers are strings)
    page = broker.run(m.browse("BACKLOG", limit=2000, selector="bucket = '7'"))
    assert [int(msg.properties["n"]) for msg in page.messages] == list(range(7, n, 100))
    assert page.messages[0].body == b"message 7"


def test_purge_of_a_persisted_queue_holds_after_a_restart(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    send_backlog(broker, "PURGED", 3000)
    send_backlog(broker, "KEPT", 10)
    assert broker.run(broker.management.destination("PURGED")).depth == 3000
    assert broker.run(broker.management.purge("PURGED")) == 3000
    info = broker.run(broker.management.destination("PURGED"))
    assert (info.depth, info.memory_used) == (0, 0)
    assert broker.run(broker.management.browse("PURGED")).messages == []
    broker.stop()

    again = start_broker()
    assert again.run(again.management.destination("PURGED")).depth == 0
    assert again.run(again.management.destination("KEPT")).depth == 10
    conn, inbox = stomp_client(again.stomp)
    conn.send("/queue/PURGED", "after the restart", headers={"receipt": "r"})
    wait_receipt(inbox, "r")
    conn.subscribe("/queue/PURGED", id="1", ack="auto")
    wait_until(lambda: inbox.bodies(), "a message on PURGED")
    conn.disconnect(receipt="bye")
    assert inbox.bodies() == ["after the restart"]


def test_retry_sends_a_dead_lettered_message_back_to_its_origin(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    conn, inbox = stomp_client(broker.stomp)
    conn.send("/queue/WORK", "poison?", headers={"persistent": "true", "receipt": "s"})
    wait_receipt(inbox, "s")
    conn.subscribe("/queue/WORK", id="1", ack="client-individual")
    first = wait_until(lambda: inbox.messages, "the delivery")[0]
    conn.nack(first.headers["message-id"], "1")  # ActiveMQ: poison ack -> DLQ
    wait_until(lambda: broker.call(lambda: (q := m.queue("ActiveMQ.DLQ")) is not None
                                   and q.size() == 1), "the DLQ copy")
    conn.unsubscribe("1")
    dead = broker.run(m.browse("ActiveMQ.DLQ")).messages
    assert [d.annotations.get("original_destination") for d in dead] == ["queue://WORK"]

    assert broker.run(m.retry_messages("ActiveMQ.DLQ", message_ids=[dead[0].message_id])) == 1
    assert broker.run(m.destination("ActiveMQ.DLQ")).depth == 0
    inbox.messages.clear()
    conn.subscribe("/queue/WORK", id="2", ack="auto")
    again = wait_until(lambda: inbox.messages, "the retried message")[0]
    assert again.body == "poison?"
    assert again.headers["message-id"] == first.headers["message-id"]
    conn.disconnect()


def test_browsing_shows_a_dead_letter_without_the_brokers_internal_annotations(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    amqp = BlockingConnection(broker.amqp)
    try:
        amqp.create_sender("queue://TRACED").send(AmqpMessage(
            body="x", durable=True, annotations={symbol("x-opt-trace"): "t-1"}))
        receiver = amqp.create_receiver("queue://TRACED", credit=1)
        assert receiver.receive(timeout=10).body == "x"
        receiver.reject()  # rejected: straight to the dead-letter queue, re-encoded
        amqp.create_sender("queue://TRACED", name="flush")  # a round trip: the settlement goes out first
        wait_until(lambda: broker.call(lambda: (q := m.queue("ActiveMQ.DLQ")) is not None
                                       and q.size() == 1), "the DLQ copy")
        dead = broker.run(m.browse("ActiveMQ.DLQ")).messages
        assert len(dead) == 1
        assert dead[0].annotations.get("original_destination") == "queue://TRACED"
        # the copy keeps the producer's annotations for AMQP consumers, in a form
        # only the broker reads: not shown
        assert "amqp_message_annotations" not in dead[0].annotations
        dlq = amqp.create_receiver("queue://ActiveMQ.DLQ")
        assert dlq.receive(timeout=10).annotations["x-opt-trace"] == "t-1"
        dlq.accept()
    finally:
        amqp.close()


def test_move_and_copy_by_selector_between_amqp_clients(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    amqp = BlockingConnection(broker.amqp)
    try:
        sender = amqp.create_sender("queue://SRC")
        for i in range(10):
            sender.send(AmqpMessage(body=f"m{i}", durable=True,
                                    properties={"color": "red" if i % 2 else "blue", "i": i}))
        assert broker.run(m.move_messages("SRC", "queue://DST", selector="color = 'red'")) == 5
        assert broker.run(m.copy_messages("SRC", "COPIES", selector="i < 4")) == 2
        assert broker.run(m.remove_messages("SRC", selector="i = 8")) == 1
        left = [msg.properties["i"] for msg in broker.run(m.browse("SRC")).messages]
        assert left == [0, 2, 4, 6]
        receiver = amqp.create_receiver("queue://DST")
        moved = []
        for _ in range(5):
            moved.append(receiver.receive(timeout=10).body)
            receiver.accept()
        assert moved == ["m1", "m3", "m5", "m7", "m9"]
        copies = amqp.create_receiver("queue://COPIES")
        got = []
        for _ in range(2):
            got.append(copies.receive(timeout=10).body)
            copies.accept()
        assert got == ["m0", "m2"]
        wait_until(lambda: broker.run(m.destination("DST")).depth == 0, "DST acknowledged")
    finally:
        amqp.close()


def test_removing_a_few_of_many_waiting_messages_takes_exactly_those(start_broker) -> None:  # type: ignore[no-untyped-def]
    """A few sequence numbers out of a long queue are looked up, not found by a
    pass over every waiting message (a mirror target's postAcks): the same
    messages go, the others stay in order, also after a restart."""
    broker = start_broker()
    m = broker.management
    send_backlog(broker, "FEW", 40)
    assert broker.run(m.remove_messages("FEW", selector="n = '3' OR n = '17' OR n = '39'")) == 3
    expected = [str(i) for i in range(40) if i not in (3, 17, 39)]
    assert [msg.properties["n"] for msg in broker.run(m.browse("FEW")).messages] == expected
    broker.stop()
    again = start_broker()
    assert [msg.properties["n"] for msg in again.run(again.management.browse("FEW")).messages] \
        == expected


def test_get_message_by_id_and_pause_resume(start_broker) -> None:  # type: ignore[no-untyped-def]
    broker = start_broker()
    m = broker.management
    conn, inbox = stomp_client(broker.stomp)
    conn.send("/queue/HELD", "one", headers={"receipt": "1"})
    wait_receipt(inbox, "1")
    first = broker.run(m.browse("HELD")).messages[0]
    got = broker.run(m.get_message("HELD", first.message_id))
    assert got is not None and got.body == b"one"
    assert broker.run(m.get_message("HELD", "ID:nope")) is None

    broker.call(lambda: m.pause("HELD"))
    assert broker.run(m.destination("HELD")).paused
    conn.subscribe("/queue/HELD", id="1", ack="auto")
    conn.send("/queue/HELD", "two", headers={"receipt": "2"})
    wait_receipt(inbox, "2")
    # paused: the consumer is attached and counted, but gets nothing
    info = broker.run(m.destination("HELD"))
    assert (info.consumers, info.depth, inbox.bodies()) == (1, 2, [])
    broker.call(lambda: m.resume("HELD"))
    wait_until(lambda: inbox.bodies() == ["one", "two"], "delivery after resume")
    conn.disconnect()


def test_removal_returns_once_the_store_no_longer_holds_the_message(start_broker) -> None:  # type: ignore[no-untyped-def]
    """`remove_messages` (and `release_through`, which readers by sequence and the
    mirror's target use before they acknowledge upstream) returns only once the
    removal is stored, for messages waiting in memory as for paged-out ones."""
    broker = start_broker()
    m = broker.management
    send_backlog(broker, "HELD", 4)
    first, last = broker.run(m.sequence_bounds("HELD"))
    assert last - first == 3

    async def remove_then_look() -> tuple[int, tuple[int, int]]:
        removed = await m.remove_messages("HELD", selector="n = '0'")
        return removed, await m.sequence_bounds("HELD")

    removed, bounds = broker.run(remove_then_look())
    assert removed == 1
    assert bounds == (first + 1, last)

    async def release_then_look() -> tuple[int, tuple[int, int]]:
        released = await m.release_through("HELD", first + 2)
        return released, await m.sequence_bounds("HELD")

    released, bounds = broker.run(release_then_look())
    assert released == 2
    assert bounds == (last, last)


def test_a_message_a_client_browsed_can_still_be_removed(start_broker) -> None:  # type: ignore[no-untyped-def]
    """A browser's copy of a message does not hold it: after an AMQP client browsed
    the queue (distribution mode copy), removing by id (management, a mirror
    target's postAck) takes the message, and the listing does not show it in flight."""
    from proton.reactor import Copy

    broker = start_broker()
    m = broker.management
    send_backlog(broker, "BROWSED", 3)
    amqp = BlockingConnection(broker.amqp)
    try:
        browser = amqp.create_receiver("queue://BROWSED", options=Copy(), credit=10)
        seen = []
        for _ in range(3):
            seen.append(browser.receive(timeout=10).properties["n"])
            browser.accept()
        browser.close()
    finally:
        amqp.close()
    assert seen == ["0", "1", "2"]
    listed = broker.run(m.browse("BROWSED")).messages
    assert [msg.in_flight for msg in listed] == [False, False, False]
    assert broker.run(m.remove_messages("BROWSED", message_ids=[listed[1].message_id])) == 1
    assert [msg.properties["n"] for msg in broker.run(m.browse("BROWSED")).messages] == ["0", "2"]


def test_move_and_copy_take_one_plain_queue_and_two_moves_do_not_double(start_broker) -> None:  # type: ignore[no-untyped-def]
    """A move or copy to a wildcard, a composite, a topic, a temporary queue or a
    durable subscription is refused (it fanned out to every matching queue, or
    dropped the message while answering "moved"); two moves of the same messages
    at once move each message once."""
    import asyncio

    import pytest

    broker = start_broker()
    m = broker.management
    send_backlog(broker, "HERE", 200)
    for to in ("queue://*", "queue://a.>", "A,B", "topic://T", "temp-queue://x",
               "durable://c:s", "bogus://x"):
        with pytest.raises(ValueError, match="needs one plain queue|bogus"):
            broker.run(m.move_messages("HERE", to, selector="JMSMessageID IS NOT NULL"))
        with pytest.raises(ValueError, match="needs one plain queue|bogus"):
            broker.run(m.copy_messages("HERE", to, selector="JMSMessageID IS NOT NULL"))
    assert broker.call(lambda: broker.broker.destination_stats()["queue://HERE"]["pending"]) == 200

    async def both() -> list[int]:
        return list(await asyncio.gather(
            m.move_messages("HERE", "THERE.A", selector="JMSMessageID IS NOT NULL"),
            m.move_messages("HERE", "THERE.B", selector="JMSMessageID IS NOT NULL")))

    moved = broker.run(both())
    assert sorted(moved) == [0, 200], moved
    stats = broker.call(lambda: broker.broker.destination_stats())
    there = [stats.get(f"queue://THERE.{x}", {}).get("pending", 0) for x in "AB"]
    assert sum(there) == 200, there
    assert stats["queue://HERE"]["pending"] == 0
