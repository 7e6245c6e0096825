"""A firing of a repeating scheduled message whose local store write fails, run
again: the mirror's target holds it once.

The target holds the job too (it is mirrored when the source takes it) and fires
each copy itself. The job is still stored on the source and fires again after a
restart; that firing must carry the same message id (so the same internal id) as
the target's copy of it, or the source's consumers' acknowledgements would not
remove the target's copies.

The failure is a real one: A's kahaDB journal files are made immutable
(`chattr +i`), so the journal's next write fails with EPERM, as on a disk that
went read-only."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mirrortools import (
    BrokerProcess,
    BrokerThread,
    make_config,
    mirror_element,
    mirrored_pair,
    receive,
    send,
)
from proton import Message
from proton.utils import BlockingConnection
from relaymq.testing import plugin_element
from relaymq.testing.waits import wait_until

pytest.importorskip("relaymq_console", reason="relaymq-console is not installed (the tests "
                    "read the brokers' management listings through it)")


def _immutable(paths: list[Path], on: bool) -> None:
    for path in paths:
        subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True)


def _can_make_immutable(tmp: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    probe = tmp / "probe"
    probe.write_bytes(b"x")
    try:
        done = subprocess.run(["chattr", "+i", str(probe)], capture_output=True)
        if done.returncode != 0:
            return False
        try:
            with probe.open("ab") as f:
                f.write(b"y")
            return False  # not enforced here
        except OSError:
            return True
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True)


@contextmanager
def _mirrored(tmp_path: Path, **options: bool) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    """A mirroring to B; whatever a test made immutable is writable again after it."""
    if not _can_make_immutable(tmp_path):
        pytest.skip("chattr +i is not available or not enforced on this file system")
    with mirrored_pair(tmp_path, **options) as (a, b):
        try:
            yield a, b
        finally:
            for side in (a, b):
                _immutable(sorted((side.dir / "kahadb").glob("db-*.log")), False)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    with _mirrored(tmp_path, scheduler=True) as brokers:
        yield brokers


def test_a_firing_whose_store_write_failed_is_applied_once_on_the_target(
        pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, b = pair
    q = f"retry.{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(a.url, timeout=30)
    try:  # three deliveries: at once, then two more 3 s apart
        conn.create_sender(f"queue://{q}").send(Message(
            body="tick", durable=True, properties={"AMQ_SCHEDULED_PERIOD": 3000,
                                                   "AMQ_SCHEDULED_REPEAT": 2}))
    finally:
        conn.close()
    wait_until(lambda: b.queue_depth(q) == 1, "the first firing on B", timeout=30,
               detail=lambda: a.output()[-3000:])
    wait_until(a.mirror_idle, "A's mirror idle after the first firing", timeout=30,
               detail=lambda: repr(a.mirror_statuses()))
    journal = sorted((a.dir / "kahadb").glob("db-*.log"))
    _immutable(journal, True)  # A's next store write (the second firing) fails
    try:
        # B fires its second copy itself while A's write of its own fails
        wait_until(lambda: b.queue_depth(q) == 2, "the second firing on B", timeout=30,
                   detail=lambda: a.output()[-3000:])
        wait_until(lambda: "store write" in a.output(), "A's failed store write", timeout=30,
                   detail=lambda: a.output()[-3000:])
        a.kill9()
    finally:
        _immutable(journal, False)
    a.start()  # the job, still stored as before its second firing, fires again
    wait_until(lambda: a.queue_depth(q) == 3, "all three firings on A", timeout=60,
               detail=lambda: a.output()[-3000:])
    wait_until(a.mirror_idle, "A's mirror idle", timeout=60,
               detail=lambda: repr(a.mirror_statuses()))
    wait_until(lambda: b.queue_depth(q) == 3, "all three firings on B", timeout=30,
               detail=lambda: b.output()[-3000:])
    info = b.api(f"queues/{q}")
    # B's own three copies; A sends none of its copies, also not the one it fired again
    assert info["enqueued"] == 3 and info["duplicates"] == 0, info
    # B first: A's consumer's acknowledgements would remove B's copies
    on_b = sorted(str(m.id) for m in receive(b.url, f"queue://{q}", 3))
    on_a = sorted(str(m.id) for m in receive(a.url, f"queue://{q}", 3))
    assert len(on_a) == 3 and on_a == on_b, (on_a, on_b)


@pytest.fixture
def pair_b(tmp_path: Path) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    with _mirrored(tmp_path) as brokers:
        yield brokers


def test_events_the_target_failed_to_store_are_sent_again(
        pair_b: tuple[BrokerProcess, BrokerProcess]) -> None:
    """B's disk refuses writes: the events A sent meanwhile are not refused and
    dropped but kept by A and sent again until B stores them (B's journal stops at
    its first failed write, as ActiveMQ's does; B is restarted once the disk is
    writable again). The repeated failure is logged once."""
    a, b = pair_b
    q = f"disk.{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(a.url, timeout=30)
    try:
        sender = conn.create_sender(f"queue://{q}")
        sender.send(Message(body="before", durable=True))
        wait_until(lambda: b.queue_depth(q) == 1, "the first message on B", timeout=30)
        journal = sorted((b.dir / "kahadb").glob("db-*.log"))
        _immutable(journal, True)  # B's next store writes fail (EPERM)
        try:
            for i in range(5):
                sender.send(Message(body=f"during {i}", durable=True))
            wait_until(lambda: "storing events failed" in b.output(), "B's failed store write",
                       timeout=30, detail=lambda: b.output()[-3000:])
            wait_until(lambda: a.mirror_statuses()[0]["sent"] > 30, "A sending them again",
                       timeout=30, detail=lambda: repr(a.mirror_statuses()))
        finally:
            _immutable(journal, False)
        sender.send(Message(body="after", durable=True))
    finally:
        conn.close()
    failures = [ln for ln in b.output().splitlines() if "storing events failed" in ln]
    # once per distinct failure (the first write's, then the stopped journal's), not
    # once per attempt
    assert 1 <= len(failures) <= 2, failures
    b.kill9()
    b.start()
    wait_until(lambda: b.queue_depth(q) == 7, "every message on B", timeout=60,
               detail=lambda: repr(a.mirror_statuses()) + b.output()[-3000:])
    wait_until(a.mirror_idle, "A's mirror idle", timeout=60,
               detail=lambda: repr(a.mirror_statuses()))
    assert all(s.get("rejected", 0) == 0 for s in a.mirror_statuses()), a.mirror_statuses()
    bodies = sorted(str(m.body) for m in receive(b.url, f"queue://{q}", 7))
    assert bodies == sorted(["before", "after"] + [f"during {i}" for i in range(5)])


def test_a_disk_that_refuses_writes_is_logged_once_per_reason(
        pair_b: tuple[BrokerProcess, BrokerProcess]) -> None:
    """B's disk refuses writes while A sends it events: A connects again every
    retry-interval (200 ms here) and sends them again, and each attempt fails the
    same way. B's log says so once per distinct reason (the journal's first failed
    write, then its stopped journal), at ERROR (the store) and WARNING (the mirror),
    not once per attempt."""
    a, b = pair_b
    q = f"quiet.{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(a.url, timeout=30)
    try:
        sender = conn.create_sender(f"queue://{q}")
        sender.send(Message(body="before", durable=True))
        wait_until(lambda: b.queue_depth(q) == 1, "the first message on B", timeout=30)
        attaches = b.output().count(" attached")
        journal = sorted((b.dir / "kahadb").glob("db-*.log"))
        _immutable(journal, True)  # B's next store writes fail (EPERM)
        try:
            sender.send(Message(body="during", durable=True))
            # ten attempts of A's, each a link of its own that fails to store
            wait_until(lambda: b.output().count(" attached") >= attaches + 10,
                       "A trying again ten times", timeout=60,
                       detail=lambda: b.output()[-3000:])
        finally:
            _immutable(journal, False)
    finally:
        conn.close()
    lines = b.output().splitlines()
    store = [ln for ln in lines if " ERROR " in ln and "store write of" in ln]
    reasons = [ln.split(" fail: ", 1)[1] for ln in store]
    # the first failed write (EPERM), then the stopped journal's refusal: each once
    assert 1 <= len(store) <= 2 and len(set(reasons)) == len(reasons), store
    assert any("Operation not permitted" in r for r in reasons), store
    mirror = [ln for ln in lines if "storing events failed" in ln]
    assert 1 <= len(mirror) <= 2 and all(" WARNING " in ln for ln in mirror), mirror
    assert a.mirror_statuses()[0]["snf_depth"] >= 1  # the event still waits on A
    # A, whose link B closes at each attempt, says so once per reason too
    closes = [ln for ln in a.output().splitlines()
              if "closed the link" in ln or "closed by the peer" in ln]
    assert 1 <= len(closes) <= 2 and all(" WARNING " in ln for ln in closes), closes
    assert "storing mirrored events failed" in a.mirror_statuses()[0]["last_error"]


REFUSED = "refused-by-the-disk"


def _refuse(db: Path, on: bool) -> None:
    """Make the SQLite store `db` refuse (or take again) every message whose bytes
    carry `REFUSED`, with SQLite's own words for a full disk."""
    with sqlite3.connect(db) as sql:
        if on:
            sql.execute("CREATE TRIGGER refuse BEFORE INSERT ON ACTIVEMQ_MSGS "
                        f"WHEN instr(NEW.MSG, CAST('{REFUSED}' AS BLOB)) > 0 "
                        "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        else:
            sql.execute("DROP TRIGGER refuse")


def test_the_failure_is_logged_again_once_the_store_wrote_between(
        tmp_path: Path, brokers: Callable[..., BrokerThread],
        caplog: pytest.LogCaptureFixture) -> None:
    """B (a JDBC store on SQLite) refuses to store what A mirrors to it, on every
    one of A's attempts: logged once. Once B stores again the failure is over, so
    the next one is logged again (once), as a new failure with another reason is."""
    pytest.importorskip("relaymq_jdbc", reason="relaymq-jdbc is not installed")
    db = tmp_path / "b.sqlite"
    cfg = make_config(persistent=True, data_directory=str(tmp_path))
    cfg.persistence_adapter = plugin_element("jdbcPersistenceAdapter", url=f"sqlite:///{db}",
                                             useLock="false")
    b = BrokerThread(cfg).start()
    try:
        a = brokers(mirrors=[mirror_element(f"tcp://{b.address}", "B")])
        q = f"queue://sql.{uuid.uuid4().hex[:8]}"
        send(a.url, q, ["before"])
        wait_until(lambda: b.depth(q) == 1, "the first message on B", timeout=30)

        def attaches() -> int:
            return sum(1 for r in caplog.records if r.name == "relaymq.mirror"
                       and r.getMessage().endswith(" attached"))

        def failures() -> tuple[int, int]:
            """B's lines about it: the store's ERRORs (the JDBC store's own: it says why
            itself), the mirror's WARNINGs."""
            records = [r for r in caplog.records if r.levelno >= logging.WARNING]
            return (sum(1 for r in records if r.levelno >= logging.ERROR
                        and r.name.startswith(("relaymq.store", "relaymq.jdbc"))),
                    sum(1 for r in records if "storing events failed" in r.getMessage()))

        with caplog.at_level(logging.INFO):
            _refuse(db, True)
            send(a.url, q, [f"{REFUSED} 1"])
            start = attaches()
            wait_until(lambda: attaches() >= start + 5, "A trying again five times",
                       timeout=30, detail=lambda: caplog.text[-3000:])
            assert failures() == (1, 1)  # five failed attempts, one line each
            _refuse(db, False)  # B takes it on A's next attempt
            wait_until(lambda: b.depth(q) == 2, "the refused message stored at last",
                       timeout=30, detail=lambda: caplog.text[-3000:])
            wait_until(lambda: any("store writes succeed again" in r.getMessage()
                                   for r in caplog.records), "B's store recovered", timeout=30)
            _refuse(db, True)  # the same failure again, after B stored: news again
            send(a.url, q, [f"{REFUSED} 2"])
            start = attaches()
            wait_until(lambda: attaches() >= start + 5, "A trying again five times more",
                       timeout=30, detail=lambda: caplog.text[-3000:])
            assert failures() == (2, 2)
            _refuse(db, False)
            wait_until(lambda: b.depth(q) == 3, "the second refused message stored",
                       timeout=30, detail=lambda: caplog.text[-3000:])
    finally:
        b.stop()
