"""What clients see of mirrored messages, and when: a proton client plays
Artemis' mirror sender into broker B (schedulerSupport), which mirrors on to
broker C; real proton consumers read both. Both brokers run in this process,
started once for the module.

* Nothing internal reaches a client: no mirror id, broker id, ``x-opt-amq-mr-*``
  or ``_AMQ_*`` the producer did not set, also when the message is re-encoded
  (dead-lettered, a scheduled copy) or mirrored on to a third broker.
* A message mirrored with ``x-opt-delivery-time``/``x-opt-delivery-delay`` is
  scheduled on the target as Artemis' target does (not deliverable before its
  time), and a postAck for it from the source removes it on the target.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from artemis_side import artemis_link, control
from mirrortools import BrokerThread, make_config, mirror_element, receive, send
from proton import Message, Timeout, symbol
from proton.utils import BlockingConnection
from relaymq.model.message import now_millis
from relaymq.testing.waits import wait_until
from relaymq_mirror.retries import RELEASE_AFTER, ack_retries
from relaymq_mirror.state import target_index, target_index_if_any

#: an Artemis journal id: not the hash of the message id, so the target keeps it
#: with the message (the internal annotation this module checks never leaks)
JOURNAL_ID = 90_000_000


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[BrokerThread, BrokerThread]]:
    c = BrokerThread(make_config(scheduler_support=True)).start()
    try:
        b = BrokerThread(make_config(
            mirrors=[mirror_element(f"tcp://{c.address}", "C")], scheduler_support=True)).start()
        try:
            wait_until(lambda: b.mirror_status("C").get("state") == "connected",
                       "B's mirror to C connected", timeout=30,
                       detail=lambda: repr(b.mirror_status("C")))
            yield b, c
        finally:
            b.stop()
    finally:
        c.stop()


def _event(body: str, ident: int, queue: str, *, properties: dict[str, Any] | None = None,
           annotations: dict[str, Any] | None = None) -> bytes:
    """A mirrored send as Artemis' source sends it (its delivery annotations)."""
    m = Message(body=body, durable=True, properties=properties)
    m.id = f"ID:artemis-{uuid.uuid4()}"
    if annotations:
        m.annotations = {symbol(k): v for k, v in annotations.items()}
    m.instructions = {symbol("x-opt-amq-mr-id"): ident, symbol("x-opt-amq-mr-dst"): queue}
    return bytes(m.encode())


def _receive(bt: BrokerThread, address: str, *, reject: bool = False,
             timeout: float = 20) -> tuple[Message, int]:
    """One message from `address` (accepted, or rejected: dead-lettered) and the
    time (epoch ms) it came."""
    conn = BlockingConnection(bt.url, timeout=30)
    try:
        rcv = conn.create_receiver(address, credit=1)
        try:
            m = rcv.receive(timeout=timeout)
        except Timeout:
            raise AssertionError(f"no message on {address} within {timeout} s") from None
        came = now_millis()
        if reject:
            rcv.reject()
        else:
            rcv.accept()
        return m, came
    finally:
        conn.close()


def _internal(m: Message) -> list[str]:
    """What of `m` a client must not see: mirror annotations, broker ids,
    delivery annotations, `_AMQ_*` properties."""
    found = [f"delivery annotation {k}" for k in (m.instructions or {})]
    for k in (m.annotations or {}):
        name = str(k).lower()
        if "mirror" in name or "-mr-" in name or "bkr" in name or "relaymq" in name \
                or "duplicate" in name:
            found.append(f"annotation {k}")
    found += [f"property {k}" for k in (m.properties or {}) if str(k).startswith("_AMQ")]
    return found


async def test_a_message_from_artemis_shows_no_mirror_internals(
        brokers: tuple[BrokerThread, BrokerThread]) -> None:
    """Delivered as sent, dead-lettered (re-encoded) and mirrored on to C: the
    consumer sees the producer's properties and annotations and nothing internal."""
    b, c = brokers
    q = f"clean.{uuid.uuid4().hex[:8]}"
    conn, sender = await artemis_link(f"tcp://{b.address}")
    try:
        outcomes = [await sender.send(_event(f"m{i}", JOURNAL_ID + i, q, properties={"k": "v"},
                                             annotations={"x-opt-app": "mine"}))
                    for i in range(2)]
        assert [o.state for o in outcomes] == ["accepted", "accepted"]
    finally:
        await conn.close()
    wait_until(lambda: c.depth(f"queue://{q}") == 2, "both mirrored on to C", timeout=30)
    for bt in (c, b):  # C's consumer first: B's consumption is mirrored to C
        delivered, _ = _receive(bt, f"queue://{q}")
        assert delivered.body == "m0"
        assert dict(delivered.properties or {}) == {"k": "v"}
        assert {str(k): v for k, v in (delivered.annotations or {}).items()} == {"x-opt-app": "mine"}
        assert not _internal(delivered)
    _receive(b, f"queue://{q}", reject=True)  # dead-lettered: a copy encoded anew
    dead, _ = _receive(b, "queue://ActiveMQ.DLQ")
    assert dead.body == "m1"
    assert dict(dead.properties or {}) == {"k": "v"}
    assert not _internal(dead), (dead.annotations, dead.properties)


async def test_a_scheduled_message_from_artemis_waits_for_its_time(
        brokers: tuple[BrokerThread, BrokerThread]) -> None:
    """`x-opt-delivery-time` (absolute) and `x-opt-delivery-delay` (from when the
    target reads it, as Artemis' target computes it): not deliverable on B before
    its time, then delivered once, without mirror internals; C gets B's copy."""
    b, c = brokers
    q = f"sched.{uuid.uuid4().hex[:8]}"
    conn, sender = await artemis_link(f"tcp://{b.address}")
    try:
        at = now_millis() + 1200
        sent = now_millis()
        outcomes = [
            await sender.send(_event("at", JOURNAL_ID + 10, q,
                                     annotations={"x-opt-delivery-time": at})),
            await sender.send(_event("delay", JOURNAL_ID + 11, q,
                                     annotations={"x-opt-delivery-delay": 1200})),
        ]
        assert [o.state for o in outcomes] == ["accepted", "accepted"]
    finally:
        await conn.close()
    # accepted, held by the scheduler: on neither queue
    assert b.depth(f"queue://{q}") == 0 and c.depth(f"queue://{q}") == 0
    assert b.call(lambda: b.broker.scheduler.pending) >= 2  # type: ignore[union-attr]
    # B's copies, when due, are mirrored on to C (read there first: a consumer on B
    # would have them removed from C)
    wait_until(lambda: c.depth(f"queue://{q}") == 2, "both copies mirrored on to C", timeout=30)
    assert now_millis() >= at
    on_c = [_receive(c, f"queue://{q}")[0] for _ in range(2)]
    got = [_receive(b, f"queue://{q}") for _ in range(2)]
    by_body = {m.body: came for m, came in got}
    assert by_body["at"] >= at
    assert by_body["delay"] >= sent + 1200
    assert sorted(m.body for m in on_c) == ["at", "delay"]
    for m in [*on_c, *(m for m, _ in got)]:
        assert not _internal(m), m
        assert not (m.annotations or {}).get(symbol("x-opt-delivery-time"))


async def test_a_scheduled_message_acknowledged_on_artemis_is_not_delivered_on_the_target(
        brokers: tuple[BrokerThread, BrokerThread]) -> None:
    """The source delivers the message at its time and its consumer acknowledges
    it: the postAck removes B's copy (and C's), nobody on B or C gets it."""
    b, c = brokers
    q = f"sched.ack.{uuid.uuid4().hex[:8]}"
    ident = JOURNAL_ID + 20
    conn, sender = await artemis_link(f"tcp://{b.address}")
    try:
        at = now_millis() + 600
        sent = await sender.send(_event("acked at the source", ident, q,
                                        annotations={"x-opt-delivery-time": at}))
        assert sent.state == "accepted"
        assert b.depth(f"queue://{q}") == 0
        while now_millis() < at + 50:  # the source's consumer gets it at its time
            time.sleep(0.05)
        ack = await sender.send(control("postAck", ident, **{"x-opt-amq-mr-adr": q,
                                                              "x-opt-amq-mr-qu": q}))
        assert ack.state == "accepted"
    finally:
        await conn.close()

    def stats(bt: BrokerThread) -> tuple[int, int]:
        def read() -> tuple[int, int]:
            holder = next(h for d, h in bt.broker.region.queues.items()  # type: ignore[union-attr]
                          if d.name == q)
            return int(holder.stats.enqueued), int(holder.stats.pending)
        return bt.call(read)

    wait_until(lambda: b.has(f"queue://{q}") and stats(b) == (1, 0),
               "the fired copy on B removed by the postAck", timeout=30,
               detail=lambda: repr(stats(b)) if b.has(f"queue://{q}") else "no queue")
    wait_until(lambda: c.has(f"queue://{q}") and stats(c) == (1, 0),
               "C's copy removed too", timeout=30,
               detail=lambda: repr(stats(c)) if c.has(f"queue://{q}") else "no queue")


async def test_a_postack_before_the_targets_time_drops_the_scheduled_message(
        brokers: tuple[BrokerThread, BrokerThread]) -> None:
    """The source delivered and acknowledged the message before the target's time
    came (another clock; a delay counted from when each broker read it): the
    postAck drops B's scheduled job, so it is never delivered on B (nor on C)."""
    b, c = brokers
    q = f"sched.early.{uuid.uuid4().hex[:8]}"
    ident = JOURNAL_ID + 30
    broker = b.broker
    assert broker is not None and broker.scheduler is not None

    def jobs_for_q() -> int:
        return b.call(lambda: sum(1 for j in broker.scheduler._jobs  # type: ignore[union-attr]
                                  if j.message.destination is not None
                                  and j.message.destination.name == q))

    conn, sender = await artemis_link(f"tcp://{b.address}")
    try:
        created = await sender.send(control("createQueue", json.dumps({
            "name": q, "address": q, "routing-type": "ANYCAST", "durable": True}),
            **{"x-opt-amq-mr-adr": q, "x-opt-amq-mr-qu": q}))  # Artemis mirrors it first
        assert created.state == "accepted"
        for i, body in enumerate(("acked early", "kept")):
            sent = await sender.send(_event(body, ident + i, q,
                                            annotations={"x-opt-delivery-delay": 1500}))
            assert sent.state == "accepted"
        assert jobs_for_q() == 2
        ack = await sender.send(control("postAck", ident, **{"x-opt-amq-mr-adr": q,
                                                              "x-opt-amq-mr-qu": q}))
        assert ack.state == "accepted"
    finally:
        await conn.close()
    wait_until(lambda: jobs_for_q() == 1, "the acknowledged message's job dropped on B",
               timeout=10)
    kept, _ = _receive(b, f"queue://{q}")  # the other one comes at its time
    assert kept.body == "kept"
    assert b.depth(f"queue://{q}") == 0 and jobs_for_q() == 0
    assert b.call(lambda: broker.scheduler.pending) == 0  # type: ignore[union-attr]


async def test_a_target_without_postacks_does_not_keep_the_change_feed_events(
        brokers: tuple[BrokerThread, BrokerThread]) -> None:
    """A standby that only receives sends (no consumer on the source, so no
    postAck) keeps the index of where its messages are current as it stores
    them: its change-feed subscriber does not hold every stored message."""
    b, _c = brokers
    q = f"standby.{uuid.uuid4().hex[:8]}"
    conn, sender = await artemis_link(f"tcp://{b.address}")
    try:
        for i in range(300):
            outcome = await sender.send(_event(f"s{i}", JOURNAL_ID + 10_000 + i, q))
            assert outcome.state == "accepted"
    finally:
        await conn.close()
    wait_until(lambda: b.depth(f"queue://{q}") == 300, "all 300 stored on B", timeout=30)
    broker = b.broker
    assert broker is not None
    pending = b.call(lambda: target_index(broker).sub.pending)
    assert pending < 30, f"the mirror target's feed subscriber holds {pending} unread events"


async def test_a_broker_whose_mirror_links_are_gone_releases_the_target_index(
        brokers: tuple[BrokerThread, BrokerThread]) -> None:
    """A broker that stopped being a mirror target (no mirror link attached, no
    postAck pending: a standby promoted after its source died) releases its
    target index once `release_after` seconds pass: it leaves the change feed and
    forgets what it indexed, so the messages its own producers send are not kept
    as unread feed events. A source that attaches later still has its postAcks
    applied: the index is read again from the store."""
    b, _c = brokers
    broker = b.broker
    assert broker is not None
    retries = b.call(lambda: ack_retries(broker))
    b.call(lambda: setattr(retries, "release_after", 0.3))
    q = f"promoted.{uuid.uuid4().hex[:8]}"
    ident = JOURNAL_ID + 20_000
    try:
        conn, sender = await artemis_link(f"tcp://{b.address}")
        try:
            for i in range(20):
                outcome = await sender.send(_event(f"mirrored {i}", ident + i, q))
                assert outcome.state == "accepted"
            # a postAck for a message never mirrored: the queue is read from the store
            # once, the postAck waits (no release while it does) and is given up
            ack = await sender.send(control("postAck", ident + 500, **{"x-opt-amq-mr-adr": q,
                                                                        "x-opt-amq-mr-qu": q}))
            assert ack.state == "accepted"
            wait_until(lambda: b.call(lambda: not retries.pending), "the unknown postAck given up",
                       timeout=10)
            assert b.call(lambda: f"queue://{q}" in target_index(broker).scanned)
        finally:
            await conn.close()

        def released() -> bool:
            index = target_index_if_any(broker)
            return index is not None and index.sub is None

        wait_until(lambda: b.call(released), "the target index released", timeout=10)
        send(b.url, q, [f"local {i}" for i in range(400)])  # the promoted broker's own producers
        index = b.call(lambda: target_index_if_any(broker))
        assert b.call(lambda: (index.sub, index.ids, index.scanned)) == (None, {}, set())
        assert b.depth(f"queue://{q}") == 420

        conn, sender = await artemis_link(f"tcp://{b.address}")  # the old source is back
        try:
            ack = await sender.send(control("postAck", ident + 7, **{"x-opt-amq-mr-adr": q,
                                                                      "x-opt-amq-mr-qu": q}))
            assert ack.state == "accepted"
        finally:
            await conn.close()
        wait_until(lambda: b.depth(f"queue://{q}") == 419, "the acknowledged message removed",
                   timeout=10, detail=lambda: f"depth {b.depth(f'queue://{q}')}")
        bodies = [m.body for m in receive(b.url, f"queue://{q}", 419)]
        assert len(bodies) == 419 and "mirrored 7" not in bodies
        assert bodies[:19] == [f"mirrored {i}" for i in range(20) if i != 7]
    finally:
        b.call(lambda: setattr(retries, "release_after", RELEASE_AFTER))
