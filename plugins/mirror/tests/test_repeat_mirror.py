"""A repeating scheduled message (`AMQ_SCHEDULED_PERIOD`, `_REPEAT`) across a
mirror (`relaymq run` processes, A mirroring to B, both with `schedulerSupport`):
like a cron job, the job is mirrored once, when A takes it, and each broker fires
its copies itself with the same ids (`<job id>@<due>`). A sends nothing per
firing, so B's consumers see each firing once; A's acknowledgement of a copy
removes B's copy; B fires the rest when A is gone."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mirrortools import BrokerProcess, mirrored_pair, receive
from proton import Message
from proton.utils import BlockingConnection
from relaymq.testing.waits import wait_until

pytest.importorskip("relaymq_console", reason="relaymq-console is not installed (the tests "
                    "read the brokers' management listings through it)")

PERIOD = 3000
REPEAT = 2  # three deliveries


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    with mirrored_pair(tmp_path, scheduler=True) as brokers:
        yield brokers


def applied_from_a(b: BrokerProcess) -> int:
    (item,) = b.api("incoming-broker-connections")["items"]
    return int(item["detail"]["applied"])


def stat(bp: BrokerProcess, q: str, name: str) -> int:
    return int(bp.api(f"queues/{q}")[name])


@pytest.mark.slow
def test_a_repeating_job_is_mirrored_once_and_fired_on_each_side(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, b = pair
    q = f"repeat.{uuid.uuid4().hex[:8]}"
    job = f"job-{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(a.url, timeout=30)
    try:  # the queue exists first (its creation is mirrored too, once)
        conn.create_receiver(f"queue://{q}", credit=0).close()
        wait_until(a.mirror_idle, "the queue's creation mirrored", timeout=30,
                   detail=lambda: repr(a.mirror_statuses()))
        before = applied_from_a(b)
        message = Message(id=job, body="tick", durable=True, properties={
            "AMQ_SCHEDULED_DELAY": 1500, "AMQ_SCHEDULED_PERIOD": PERIOD,
            "AMQ_SCHEDULED_REPEAT": REPEAT})
        conn.create_sender(f"queue://{q}").send(message)
    finally:
        conn.close()
    wait_until(a.mirror_idle, "the job mirrored", timeout=30,
               detail=lambda: repr(a.mirror_statuses()))
    assert applied_from_a(b) == before + 1  # the job, once, when A took it
    assert b.queue_depth(q) == 0  # B holds the job, not a message

    # the first firing on each side; A's consumer takes A's copy, and its
    # acknowledgement (a postAck naming the copy's id) removes B's copy
    wait_until(lambda: stat(a, q, "enqueued") >= 1, "A's first firing", timeout=30,
               detail=lambda: a.output()[-3000:])
    wait_until(lambda: stat(b, q, "enqueued") >= 1, "B's first firing", timeout=30,
               detail=lambda: b.output()[-3000:])
    (first,) = receive(a.url, f"queue://{q}", 1)
    assert str(first.id).startswith(f"{job}@"), first.id
    wait_until(lambda: stat(b, q, "dequeued") == 1, "A's acknowledgement applied on B",
               timeout=30, detail=lambda: repr(b.api(f"queues/{q}")) + b.output()[-3000:])
    wait_until(a.mirror_idle, "A's mirror idle after the acknowledgement", timeout=30,
               detail=lambda: repr(a.mirror_statuses()))
    assert applied_from_a(b) == before + 2  # the job and the postAck: no copy of A's

    # without A, B fires the rest: the job is B's too
    a.stop()
    wait_until(lambda: stat(b, q, "enqueued") == REPEAT + 1, "B's last firing without A",
               timeout=3 * PERIOD / 1000 + 30, detail=lambda: b.output()[-3000:])
    info = b.api(f"queues/{q}")
    # each firing once on B: its own copies, none of A's (no duplicates dropped)
    assert info["enqueued"] == REPEAT + 1 and info["duplicates"] == 0, info
    assert info["depth"] == REPEAT, info
    rest = receive(b.url, f"queue://{q}", REPEAT)
    assert b.queue_depth(q) == 0
    dues = sorted(int(str(m.id).rpartition("@")[2]) for m in [first, *rest])
    assert all(str(m.id).startswith(f"{job}@") for m in rest), [m.id for m in rest]
    # one copy per due time, a period apart: the ids A gives its copies
    assert dues == [dues[0] + i * PERIOD for i in range(REPEAT + 1)], dues
    assert [m.body for m in rest] == ["tick"] * REPEAT
