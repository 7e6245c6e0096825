"""A cron-scheduled message across a mirror (`relaymq run` processes, A mirroring
to B, both with `schedulerSupport`): the send is mirrored once, when A takes the
job (as Artemis mirrors the send of a scheduled message); each broker holds the
job and fires it at each cron time itself. A sends nothing per firing, B's
copies have A's copies' ids (so A's acknowledgements remove them), and B keeps
firing when A is gone."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mirrortools import BrokerProcess, mirrored_pair, stomp_send
from proton.utils import BlockingConnection
from relaymq.testing.waits import wait_until

pytest.importorskip("relaymq_console", reason="relaymq-console is not installed (the tests "
                    "read the brokers' management listings through it)")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    with mirrored_pair(tmp_path, {"stomp": True}, scheduler=True) as brokers:
        yield brokers


def applied_from_a(b: BrokerProcess) -> int:
    (item,) = b.api("incoming-broker-connections")["items"]
    return int(item["detail"]["applied"])


def ids(bp: BrokerProcess, q: str) -> list[str]:
    return sorted(m["message_id"] for m in bp.api(f"queues/{q}/messages")["messages"])


@pytest.mark.slow
def test_a_cron_job_is_mirrored_once_and_fired_on_each_side(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, b = pair
    q = f"cron.{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(a.url, timeout=30)
    try:  # the queue exists first (its creation is mirrored too, once)
        conn.create_receiver(f"queue://{q}", credit=0).close()
    finally:
        conn.close()
    stomp_send(a, f"/queue/{q}", "every minute", {"persistent": "true",
                                                  "AMQ_SCHEDULED_CRON": "* * * * *"})
    wait_until(a.mirror_idle, "the job's send mirrored", timeout=30,
               detail=lambda: repr(a.mirror_statuses()))
    before = applied_from_a(b)
    assert b.queue_depth(q) == 0  # B holds the job, not a message

    # the next minute: each side fires its own copy
    wait_until(lambda: a.queue_depth(q) == 1, "A's first firing", timeout=75,
               detail=lambda: a.output()[-3000:])
    wait_until(lambda: b.queue_depth(q) == 1, "B's first firing", timeout=30,
               detail=lambda: b.output()[-3000:])
    wait_until(a.mirror_idle, "A's mirror idle after the firing", timeout=30,
               detail=lambda: repr(a.mirror_statuses()))
    assert applied_from_a(b) == before  # A sent nothing for its firing
    info = b.api(f"queues/{q}")
    assert info["enqueued"] == 1 and info["duplicates"] == 0, info
    assert ids(a, q) == ids(b, q)  # the same firing has the same id on both

    # without A, B fires on: the job is B's too
    a.stop()
    wait_until(lambda: b.queue_depth(q) == 2, "B's second firing without A", timeout=75,
               detail=lambda: b.output()[-3000:])
    assert b.api(f"queues/{q}")["enqueued"] == 2
