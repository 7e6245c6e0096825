"""What clients see on a mirror's source and target: two `relaymq run` processes
(kahaDB, scheduler support, AMQP and STOMP, the console) started once for the
module, A mirroring to B. Each test uses its own queues."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mirrortools import BrokerProcess, mirror_xml, stomp_send
from proton import Message, Timeout, symbol
from proton.utils import BlockingConnection
from relaymq.testing.waits import wait_until

pytest.importorskip("relaymq_console", reason="relaymq-console is not installed (the tests "
                    "read the brokers' management listings through it)")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

DUPLICATE_ID = "_AMQ_DUPL_ID"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    tmp: Path = tmp_path_factory.mktemp("pair")
    # postAcks whose message is not found are given up after two looks 20 ms apart,
    # so one that waited for a consumer's release without these fixes would be lost
    args = ["-D", "mirrorAckManagerRetryDelay=20", "-D", "mirrorAckManagerQueueAttempts=2"]
    b = BrokerProcess(tmp, "b", console=True, stomp=True, scheduler=True, args=args).start()
    try:
        a = BrokerProcess(tmp, "a", mirror_xml(b.port, "B"), console=True, stomp=True,
                          scheduler=True).start()
        try:
            wait_until(a.mirror_idle, "A's mirror to B connected", timeout=60,
                       detail=lambda: repr(a.mirror_statuses()))
            yield a, b
        finally:
            a.stop()
    finally:
        b.stop()


def mirror_done(source: BrokerProcess) -> None:
    wait_until(source.mirror_idle, f"the mirror of {source.name} to have nothing pending",
               timeout=60, interval=0.1, detail=lambda: repr(source.mirror_statuses()))


def receive_one(bp: BrokerProcess, address: str, timeout: float = 30) -> Message:
    """Receive and accept one message from `address` on `bp` (AssertionError on timeout)."""
    conn = BlockingConnection(bp.url, timeout=30)
    try:
        rcv = conn.create_receiver(address, credit=1)
        try:
            m = rcv.receive(timeout=timeout)
        except Timeout:
            raise AssertionError(f"no message on {address} at {bp.name} within {timeout} s; "
                                 f"the broker said:\n{bp.output()[-3000:]}") from None
        rcv.accept()
        return m
    finally:
        conn.close()


def nothing_on(bp: BrokerProcess, address: str, timeout: float = 1.0) -> bool:
    conn = BlockingConnection(bp.url, timeout=30)
    try:
        rcv = conn.create_receiver(address, credit=1)
        try:
            rcv.receive(timeout=timeout)
        except Timeout:
            return True
        return False
    finally:
        conn.close()


# -- scheduled messages: no internal property leaks ---------------------------------------------
def test_a_mirrored_stomp_scheduled_message_carries_only_its_producers_properties(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    """The mirror's duplicate-detection id is internal: the scheduled message, as
    delivered on the target (and the source), has the headers its producer set and
    no `_AMQ_DUPL_ID`."""
    a, b = pair
    q = f"sched.stomp.{uuid.uuid4().hex[:8]}"
    stomp_send(a, f"/queue/{q}", "later", {"persistent": "true", "AMQ_SCHEDULED_DELAY": "300",
                                           "color": "red"})
    mirror_done(a)
    on_b = receive_one(b, f"queue://{q}")
    on_a = receive_one(a, f"queue://{q}")
    for where, m in (("B", on_b), ("A", on_a)):
        props = dict(m.properties or {})
        assert DUPLICATE_ID not in props, f"{where}: {props}"
        assert props == {"color": "red"}, f"{where}: {props}"
        assert bytes(m.body) == b"later", where


def test_a_mirrored_amqp_delayed_message_keeps_its_producers_duplicate_id(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    """With `x-opt-delivery-delay`: the target delivers the producer's own
    `_AMQ_DUPL_ID` (not the mirror's), and a plain delayed message gets none."""
    a, b = pair
    q = f"sched.amqp.{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(a.url, timeout=30)
    try:
        sender = conn.create_sender(f"queue://{q}")
        for props in ({"n": 1}, {"n": 2, DUPLICATE_ID: "producers-own-id"}):
            sender.send(Message(body=f"delayed {props['n']}", durable=True, properties=props,
                                annotations={symbol("x-opt-delivery-delay"): 300}))
    finally:
        conn.close()
    mirror_done(a)
    got = sorted((receive_one(b, f"queue://{q}") for _ in range(2)),
                 key=lambda m: m.properties["n"])
    assert [dict(m.properties) for m in got] == [
        {"n": 1}, {"n": 2, DUPLICATE_ID: "producers-own-id"}]
    assert [m.body for m in got] == ["delayed 1", "delayed 2"]


def test_a_delivered_scheduled_copy_has_no_scheduling_properties(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    """`AMQ_SCHEDULED_DELAY` as an AMQP application property: the copy delivered
    on A, and the one mirrored to B, no longer ask for scheduling (ActiveMQ removes
    the properties, so a copy that goes on over a network is not scheduled again)."""
    a, b = pair
    q = f"sched.props.{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(a.url, timeout=30)
    try:
        conn.create_sender(f"queue://{q}").send(Message(
            body="delayed", durable=True, properties={"AMQ_SCHEDULED_DELAY": 300, "k": "v"}))
    finally:
        conn.close()
    on_b = receive_one(b, f"queue://{q}")
    on_a = receive_one(a, f"queue://{q}")
    assert dict(on_b.properties) == {"k": "v"}
    assert dict(on_a.properties) == {"k": "v"}


def assert_held_until(b: BrokerProcess, q: str, due: int) -> None:
    """B does not show the scheduled message on `q` before `due` (epoch ms): a depth
    answered before that time must be 0 (on a slow machine the answer may come
    after it, and then says nothing)."""
    from relaymq.model.message import now_millis

    depth = b.queue_depth(q)
    if now_millis() < due:
        assert depth == 0, f"{q} on B before its time"


def test_a_message_scheduled_on_a_reaches_b_when_due_and_goes_with_its_acknowledgement(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    """`x-opt-delivery-time` on A: A mirrors it when it is sent (as Artemis does) and
    B's scheduler holds it until its time; A's own copy, delivered when due, goes to
    B with the same duplicate id and is dropped there, so B has it once; A's
    consumer's acknowledgement removes it from B. Nothing internal (mirror id,
    `_AMQ_*`) on either side."""
    from relaymq.model.message import now_millis

    a, b = pair
    q = f"sched.due.{uuid.uuid4().hex[:8]}"
    at = now_millis() + 2000
    conn = BlockingConnection(a.url, timeout=30)
    try:
        conn.create_sender(f"queue://{q}").send(Message(
            body="due later", durable=True, properties={"k": "v"},
            annotations={symbol("x-opt-delivery-time"): at}))
    finally:
        conn.close()
    assert_held_until(b, q, at)
    wait_until(lambda: b.queue_depth(q) == 1, f"the copy of {q} on B", timeout=30,
               detail=lambda: b.output()[-3000:])
    assert now_millis() >= at
    on_a = receive_one(a, f"queue://{q}")
    assert on_a.body == "due later" and dict(on_a.properties) == {"k": "v"}
    wait_until(lambda: b.queue_depth(q) == 0, f"{q} on B removed with A's acknowledgement",
               timeout=30, detail=lambda: repr(b.api(f"queues/{q}")))
    mirror_done(a)
    info = b.api(f"queues/{q}")
    assert info["enqueued"] == 1 and info["dequeued"] == 1, info
    assert info["duplicates"] == 1, info  # A's delivered copy


def test_a_message_scheduled_on_a_is_delivered_on_b_at_its_time_when_a_is_gone(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    """A STOMP `AMQ_SCHEDULED_DELAY` on A: mirrored when sent, with the absolute
    time. A is killed before that time: B delivers it at its time without A. A,
    restarted, delivers its own copy late and mirrors it: B drops it (one copy)."""
    from relaymq.model.message import now_millis

    a, b = pair
    q = f"sched.lost.{uuid.uuid4().hex[:8]}"
    sent = now_millis()
    stomp_send(a, f"/queue/{q}", "outlives A", {"persistent": "true",
                                                "AMQ_SCHEDULED_DELAY": "2500", "k": "v"})
    mirror_done(a)  # B has the scheduled message
    a.kill9()
    try:
        assert_held_until(b, q, sent + 2500)
        on_b = receive_one(b, f"queue://{q}", timeout=60)
        assert now_millis() >= sent + 2500
        assert bytes(on_b.body) == b"outlives A" and dict(on_b.properties) == {"k": "v"}
    finally:
        a.start()
    wait_until(a.mirror_idle, "A's mirror to B connected again", timeout=60,
               detail=lambda: repr(a.mirror_statuses()))
    on_a = receive_one(a, f"queue://{q}", timeout=30)  # A's job, recovered and delivered
    assert bytes(on_a.body) == b"outlives A"
    mirror_done(a)
    info = b.api(f"queues/{q}")
    assert info["depth"] == 0 and info["enqueued"] == 1 and info["duplicates"] == 1, info


async def _source_link(b: BrokerProcess, node: str) -> tuple[Any, Any]:
    """A mirror link to `b` as another broker (Artemis, say) opens it."""
    from relaymq_amqp.outgoing import AmqpConnection

    snf = "$ACTIVEMQ_ARTEMIS_MIRROR_relaymq"
    conn = AmqpConnection(f"tcp://127.0.0.1:{b.port}", retry_interval=0.1, container_id=node)
    await conn.connect()
    sender = await conn.open_sender(
        snf, name=f"{snf}:{uuid.uuid4()}", source_address=snf,
        properties={"x-opt-amq-bkr-id": node}, desired_capabilities=["amq.mirror"],
        rcv_settle_first=True)
    return conn, sender


@pytest.mark.slow
async def test_cron_messages_across_the_mirror_carry_no_internal_property(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    """A cron job on A (the first firing comes at the next minute): B's copy (B
    holds the job too and fires it) carries neither the mirror's `_AMQ_DUPL_ID`
    nor `AMQ_SCHEDULED_CRON`. A mirrored message that
    still asks for a cron schedule (as another broker may send one), sent twice
    (a replayed event), is scheduled on B; each firing is delivered once, without
    the mirror's duplicate id."""
    a, b = pair
    q1 = f"cron.a.{uuid.uuid4().hex[:8]}"
    q2 = f"cron.b.{uuid.uuid4().hex[:8]}"
    stomp_send(a, f"/queue/{q1}", "every minute", {"persistent": "true",
                                                   "AMQ_SCHEDULED_CRON": "* * * * *",
                                                   "color": "green"})
    event = Message(body="from another source", durable=True,
                    properties={"AMQ_SCHEDULED_CRON": "* * * * *", "color": "blue"})
    event.instructions = {symbol("x-opt-amq-mr-id"): 4242, symbol("x-opt-amq-mr-dst"): q2}
    node = str(uuid.uuid4())
    conn, sender = await _source_link(b, node)
    try:
        for _ in range(2):  # the event and its replay
            assert (await sender.send(bytes(event.encode()))).state == "accepted"
    finally:
        await conn.close()
    on_b = receive_one(b, f"queue://{q1}", timeout=130)
    assert dict(on_b.properties) == {"color": "green"}
    assert bytes(on_b.body) == b"every minute"
    on_a = receive_one(a, f"queue://{q1}", timeout=30)
    assert dict(on_a.properties) == {"color": "green"}
    scheduled = receive_one(b, f"queue://{q2}", timeout=130)
    assert dict(scheduled.properties) == {"color": "blue"}
    # the replayed event is dropped when its job is taken (a cron job's duplicate id
    # names the job, not each copy): counted for its source
    incoming = {i["name"]: i for i in b.api("incoming-broker-connections")["items"]}
    assert incoming[node]["detail"]["duplicates"] == 1, incoming[node]
    assert b.queue_depth(q2) == 0


# -- an acknowledgement on the source for a message a consumer on the target holds -------------
def test_a_message_held_on_the_target_goes_once_the_source_acknowledged_it(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    """A consumer on B holds a mirrored message (delivered, not settled) while A's
    consumer acknowledges it: the postAck waits (longer than its retry attempts
    would last) and removes the message when B's consumer lets it go (here: its
    connection closes without settling), so it is not delivered on B again."""
    a, b = pair
    q = f"held.{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(a.url, timeout=30)
    try:
        conn.create_sender(f"queue://{q}").send(Message(body="acked on A", durable=True))
    finally:
        conn.close()
    mirror_done(a)
    holder = BlockingConnection(b.url, timeout=30)
    try:
        held = holder.create_receiver(f"queue://{q}", credit=1).receive(timeout=30)
        assert held.body == "acked on A"  # delivered on B, not settled
        assert receive_one(a, f"queue://{q}").body == "acked on A"  # acknowledged on A
        mirror_done(a)  # B accepted the postAck
        # more mirrored work after it, while the consumer on B still holds the message
        send_and_wait = BlockingConnection(a.url, timeout=30)
        try:
            send_and_wait.create_sender(f"queue://{q}.other").send(
                Message(body="later", durable=True))
        finally:
            send_and_wait.close()
        mirror_done(a)
        assert b.queue_depth(f"{q}.other") == 1
        assert b.queue_depth(q) == 1
    finally:
        holder.close()  # released unsettled: back to the queue, where the postAck waits
    wait_until(lambda: b.queue_depth(q) == 0, f"the held message removed from {q} on B",
               timeout=30, detail=lambda: b.output()[-3000:])
