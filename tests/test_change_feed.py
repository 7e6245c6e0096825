"""The change feed through real clients: STOMP (a raw STOMP 1.2 socket client) and
AMQP (python-qpid-proton), kahaDB underneath, a test plugin that records the feed.

Every event kind; dead-letter moves and expiry; a transaction that rolls back
produces nothing; destinations and durable subscriptions recovered after a restart
are flagged; a subscriber that stops reading does not slow producers and loses
nothing; a durable cursor survives kill -9 of a real broker process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # feed_support (also run as the broker process's script)

from feed_support import BrokerLoop, FeedRecorder, describe  # noqa: E402
from relaymq.config.model import BrokerConfig  # noqa: E402
from relaymq.feed import (  # noqa: E402
    EVENT_TYPES,
    DestinationConfigured,
    DestinationCreated,
    MessageAdded,
)
from relaymq.model.destination import Destination  # noqa: E402
from relaymq.testing import (  # noqa: E402
    broker_config,
    free_port,
    plugin_element,
    wait_until,  # noqa: E402
)
from relaymq_stomp.testing import BlockingStomp  # noqa: E402


def kaha_config(tmp: Path) -> BrokerConfig:
    cfg = broker_config("stomp://127.0.0.1:0", "amqp://127.0.0.1:0", persistent=True)
    cfg.persistence_adapter = plugin_element("kahaDB", directory=str(tmp / "kahadb"))
    return cfg


def start(tmp: Path) -> tuple[BrokerLoop, FeedRecorder]:
    recorder = FeedRecorder()
    return BrokerLoop(kaha_config(tmp), setup=recorder.install), recorder


def events(broker: BrokerLoop, recorder: FeedRecorder) -> list[dict[str, Any]]:
    return [describe(e) for e in broker.call(recorder.take)]


def wait_events(broker: BrokerLoop, recorder: FeedRecorder, pred: Any,
                what: str = "events") -> list[dict[str, Any]]:
    return wait_until(lambda: (lambda evs: evs if pred(evs) else None)(events(broker, recorder)),
                    what=what)


def of(evs: list[dict[str, Any]], kind: str, **match: Any) -> list[dict[str, Any]]:
    return [e for e in evs if e["kind"] == kind and all(e.get(k) == v for k, v in match.items())]


@pytest.fixture
def feed_broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    broker, recorder = start(tmp_path)
    yield broker, recorder
    broker.stop()


def test_stomp_send_ack_and_destination_created(feed_broker) -> None:  # type: ignore[no-untyped-def]
    broker, rec = feed_broker
    c = BlockingStomp(broker.port("stomp"))
    assert c.send("/queue/feed.q", b"hello")[0] == "RECEIPT"
    c.frame("SUBSCRIBE", {"destination": "/queue/feed.q", "id": "1", "ack": "client-individual"})
    cmd, headers, body = c.read()
    assert cmd == "MESSAGE" and body == b"hello"
    c.frame("ACK", {"id": headers["ack"], "receipt": "a"})
    assert c.read()[0] == "RECEIPT"
    c.close()
    evs = wait_events(broker, rec, lambda e: of(e, "message.removed"))
    created = of(evs, "destination.created", destination="queue://feed.q")
    assert created == [{"kind": "destination.created", "origin": None,
                        "destination": "queue://feed.q", "recovered": False}]
    [added] = of(evs, "message.added", dest="queue://feed.q")
    assert added["body"] == "hello" and added["placements"] == [["queue://feed.q", 1]]
    [removed] = of(evs, "message.removed")
    assert (removed["reason"], removed["key"], removed["seq"], removed["id"]) == \
        ("acked", "queue://feed.q", 1, added["id"])
    kinds = [e["kind"] for e in evs]
    assert kinds.index("destination.created") < kinds.index("message.added") < \
        kinds.index("message.removed")


def test_stomp_transaction_rolled_back_produces_nothing(feed_broker) -> None:  # type: ignore[no-untyped-def]
    broker, rec = feed_broker
    c = BlockingStomp(broker.port("stomp"))
    c.frame("BEGIN", {"transaction": "t1"})
    c.frame("SEND", {"destination": "/queue/feed.tx", "persistent": "true", "transaction": "t1"},
            b"never")
    c.frame("ABORT", {"transaction": "t1", "receipt": "ab"})
    assert c.read()[0] == "RECEIPT"
    c.frame("BEGIN", {"transaction": "t2"})
    c.frame("SEND", {"destination": "/queue/feed.tx", "persistent": "true", "transaction": "t2"},
            b"committed")
    c.frame("COMMIT", {"transaction": "t2", "receipt": "co"})
    assert c.read()[0] == "RECEIPT"
    c.close()
    evs = wait_events(broker, rec, lambda e: of(e, "message.added", dest="queue://feed.tx"))
    bodies = [e["body"] for e in of(evs, "message.added")]
    assert bodies == ["committed"]
    # the rolled-back send used sequence number 1; numbers are never reused
    assert of(evs, "message.added")[0]["placements"] == [["queue://feed.tx", 2]]


def test_amqp_send_and_accept(feed_broker) -> None:  # type: ignore[no-untyped-def]
    from proton import Message
    from proton.utils import BlockingConnection

    broker, rec = feed_broker
    conn = BlockingConnection(f"amqp://127.0.0.1:{broker.port('amqp')}", timeout=10)
    try:
        conn.create_sender("queue://feed.amqp").send(Message(body="over amqp", durable=True))
        r = conn.create_receiver("queue://feed.amqp", credit=1)
        assert r.receive(timeout=10).body == "over amqp"
        r.accept()
    finally:
        conn.close()
    evs = wait_events(broker, rec, lambda e: of(e, "message.removed", dest="queue://feed.amqp"))
    [added] = of(evs, "message.added", dest="queue://feed.amqp")
    assert added["placements"] == [["queue://feed.amqp", 1]]
    [removed] = of(evs, "message.removed", dest="queue://feed.amqp")
    assert removed["reason"] == "acked" and removed["id"] == added["id"]


def test_dead_letter_move_and_expiry(feed_broker) -> None:  # type: ignore[no-untyped-def]
    broker, rec = feed_broker
    c = BlockingStomp(broker.port("stomp"))
    c.send("/queue/feed.poison", b"bad")
    expires = int(time.time() * 1000) + 300
    c.send("/queue/feed.exp", b"stale", expires=str(expires))
    c.frame("SUBSCRIBE", {"destination": "/queue/feed.poison", "id": "1", "ack": "client-individual"})
    cmd, headers, _ = c.read()
    assert cmd == "MESSAGE"
    c.frame("NACK", {"id": headers["ack"], "receipt": "n"})  # poison: no redelivery policy
    assert c.read()[0] == "RECEIPT"
    wait_until(lambda: time.time() * 1000 > expires + 50, what="the TTL to pass")
    c.frame("SUBSCRIBE", {"destination": "/queue/feed.exp", "id": "2", "ack": "auto",
                          "receipt": "s2"})
    assert c.read()[0] == "RECEIPT"
    evs = wait_events(broker, rec, lambda e: len(of(e, "message.added", dest="queue://ActiveMQ.DLQ")) == 2,
                      "two dead-lettered copies")
    c.close()
    [killed] = of(evs, "message.removed", key="queue://feed.poison")
    assert killed["reason"] == "killed"
    [expired] = of(evs, "message.removed", key="queue://feed.exp")
    assert expired["reason"] == "expired"
    copies = of(evs, "message.added", dest="queue://ActiveMQ.DLQ")
    assert sorted(e["body"] for e in copies) == ["bad", "stale"]
    for removal, body in ((killed, "bad"), (expired, "stale")):
        copy = next(e for e in copies if e["body"] == body)
        assert evs.index(removal) < evs.index(copy)  # one batch: removal, then the copy


def test_durable_subscription_and_temporary_destination_events(feed_broker) -> None:  # type: ignore[no-untyped-def]
    broker, rec = feed_broker
    c = BlockingStomp(broker.port("stomp"), **{"client-id": "feedapp"})
    c.frame("SUBSCRIBE", {"destination": "/topic/feed.t", "id": "1",
                          "activemq.subscriptionName": "s1", "receipt": "s"})
    assert c.read()[0] == "RECEIPT"
    c.frame("SEND", {"destination": "/topic/feed.t", "receipt": "p"}, b"to topic")
    frames = [c.read(), c.read()]
    assert {f[0] for f in frames} == {"RECEIPT", "MESSAGE"}
    c.frame("UNSUBSCRIBE", {"id": "1", "receipt": "u1"})
    assert c.read()[0] == "RECEIPT"
    c.frame("UNSUBSCRIBE", {"activemq.subscriptionName": "s1", "receipt": "u2"})
    assert c.read()[0] == "RECEIPT"
    c.frame("SEND", {"destination": "/temp-queue/r", "receipt": "tq"}, b"temp")
    assert c.read()[0] == "RECEIPT"
    c.frame("DISCONNECT", {"receipt": "bye"})
    assert c.read()[0] == "RECEIPT"
    c.close()
    evs = wait_events(broker, rec, lambda e: of(e, "destination.deleted"))
    [sc] = of(evs, "subscription.created")
    assert (sc["key"], sc["client_id"], sc["name"], sc["topic"], sc["recovered"]) == \
        ("durable://feedapp:s1", "feedapp", "s1", "topic://feed.t", False)
    [sd] = of(evs, "subscription.deleted")
    assert sd["key"] == "durable://feedapp:s1"
    [added] = of(evs, "message.added", dest="topic://feed.t")
    assert added["placements"] == [["durable://feedapp:s1", 1]]
    temp = [e for e in of(evs, "destination.created") if e["destination"].startswith("temp-queue://")]
    [deleted] = of(evs, "destination.deleted")
    assert temp and deleted["destination"] == temp[0]["destination"]


def test_pause_and_resume_are_destination_configured_events(feed_broker) -> None:  # type: ignore[no-untyped-def]
    broker, rec = feed_broker
    c = BlockingStomp(broker.port("stomp"))
    assert c.send("/queue/feed.cfg", b"x")[0] == "RECEIPT"
    c.close()
    broker.call(lambda: broker.broker.management.pause("feed.cfg"))
    broker.call(lambda: broker.broker.management.resume("feed.cfg"))

    def configured() -> list[DestinationConfigured] | None:
        got = [e for e in broker.call(rec.take) if isinstance(e, DestinationConfigured)]
        return got if len(got) == 2 else None

    raw = wait_until(configured, what="two destination.configured events")
    assert [(e.destination.key, dict(e.settings)) for e in raw] == [
        ("queue://feed.cfg", {"paused": True}), ("queue://feed.cfg", {"paused": False})]
    assert of(events(broker, rec), "destination.configured")[0]["destination"] == "queue://feed.cfg"


def test_every_event_kind_is_covered_here() -> None:
    """The tests above see every kind (names checked so a new kind needs a test)."""
    text = Path(__file__).read_text()
    for cls in EVENT_TYPES:
        assert f'"{cls.kind}"' in text, f"no test looks for {cls.kind} events"


def test_recovered_destinations_and_subscriptions_are_flagged(tmp_path: Path) -> None:
    broker, rec = start(tmp_path)
    try:
        c = BlockingStomp(broker.port("stomp"), **{"client-id": "rapp"})
        c.send("/queue/feed.keep", b"kept")
        c.frame("SUBSCRIBE", {"destination": "/topic/feed.rt", "id": "1",
                              "activemq.subscriptionName": "d", "receipt": "s"})
        assert c.read()[0] == "RECEIPT"
        c.close()
    finally:
        broker.stop()
    broker, rec = start(tmp_path)
    try:
        evs = events(broker, rec)
        queue = of(evs, "destination.created", destination="queue://feed.keep")
        assert queue == [{"kind": "destination.created", "origin": None,
                          "destination": "queue://feed.keep", "recovered": True}]
        [sub] = of(evs, "subscription.created", key="durable://rapp:d")
        assert sub["recovered"] is True
        assert not of(evs, "message.added")  # recovery is not a send
        c = BlockingStomp(broker.port("stomp"))
        c.send("/queue/feed.new", b"x")
        c.close()
        evs = wait_events(broker, rec, lambda e: of(e, "destination.created",
                                                   destination="queue://feed.new"))
        assert of(evs, "destination.created", destination="queue://feed.new")[0]["recovered"] is False
    finally:
        broker.stop()


def test_a_subscriber_that_stops_reading_slows_nobody_and_loses_nothing(tmp_path: Path) -> None:
    broker, rec = start(tmp_path)
    try:
        slow = broker.call(lambda: broker.broker.change_feed.subscribe({MessageAdded}))
        cursor = broker.run(broker.broker.change_feed.subscribe_durable("slow", {MessageAdded}))
        c = BlockingStomp(broker.port("stomp"))
        n = 3000
        for i in range(n):  # pipelined persistent SENDs, every receipt awaited below
            c.frame("SEND", {"destination": "/queue/feed.load", "persistent": "true",
                             "receipt": str(i)}, f"m{i}".encode())
        receipts = [c.read() for _ in range(n)]
        assert [r[1]["receipt-id"] for r in receipts] == [str(i) for i in range(n)]
        c.close()
        # nobody read the feed meanwhile; now both subscribers read everything, in order
        got = broker.call(lambda: slow.drain())
        assert [e.message.body for e in got] == [f"m{i}".encode() for i in range(n)]

        async def read_cursor() -> list[bytes]:
            out = []
            for _ in range(n):
                out.append((await cursor.get()).message.body)
            await cursor.ack()
            return out

        assert broker.run(read_cursor()) == [f"m{i}".encode() for i in range(n)]
        assert broker.call(lambda: cursor.pending) == 0
    finally:
        broker.stop()


def test_a_cursor_that_cancels_pairs_drops_a_send_consumed_before_it_was_read(tmp_path: Path) -> None:
    """`cancel_pairs` (what a mirror sets): a message sent and consumed before the
    cursor handed its send out costs the reader nothing (neither event, no record
    left); a send already read keeps its removal; a message from a peer broker
    keeps both events (its removal must reach that peer)."""
    from relaymq.broker.security import ConnectRequest
    from relaymq.feed import MessageRemoved
    from relaymq.model.message import Message

    broker, _ = start(tmp_path)
    try:
        cursor = broker.run(broker.broker.change_feed.subscribe_durable(
            "pairs", {MessageAdded, MessageRemoved}))
        broker.call(lambda: setattr(cursor, "cancel_pairs", True))

        async def from_peer() -> None:
            peer = await broker.broker.connect(ConnectRequest(), network=True, origin="broker-b")
            await peer.send(Message(b"peer", destination=Destination.queue("feed.pairs"),
                                    durable=True))
            await peer.close()

        c = BlockingStomp(broker.port("stomp"))
        for i in range(4):
            assert c.send("/queue/feed.pairs", f"m{i}".encode())[0] == "RECEIPT"
        broker.run(from_peer())
        c.frame("SUBSCRIBE", {"destination": "/queue/feed.pairs", "id": "1",
                              "ack": "client-individual", "activemq.prefetchSize": "1"})
        for expected in (b"m0", b"m1", b"m2", b"m3", b"peer"):  # all consumed, none read yet
            cmd, headers, body = c.read()
            assert cmd == "MESSAGE" and body == expected
            c.frame("ACK", {"id": headers["ack"]})
        wait_until(lambda: broker.call(lambda: cursor.cancelled) == 4, what="four dropped pairs")
        # what is left to read: the peer's send and its removal, not the dropped sends
        wait_until(lambda: broker.call(lambda: cursor.pending) == 2, what="the peer's pair")

        def read() -> list[tuple[str, bytes | None]]:
            return [(e.kind, e.message.body if isinstance(e, MessageAdded) else None)
                    for _, e in cursor.take(100)]

        got: list[tuple[str, bytes | None]] = []
        wait_until(lambda: got.extend(broker.call(read)) or len(got) >= 2, what="the peer's pair")
        assert got == [("message.added", b"peer"), ("message.removed", None)]
        # a send handed out before its consumption: its removal is recorded
        c.frame("SEND", {"destination": "/queue/feed.pairs", "persistent": "true", "receipt": "r"},
                b"m4")
        frames = {f[0]: f for f in (c.read(), c.read())}  # its receipt, and it (to the consumer)
        assert sorted(frames) == ["MESSAGE", "RECEIPT"] and frames["MESSAGE"][2] == b"m4"
        wait_until(lambda: broker.call(lambda: cursor.pending) == 1, what="the send of m4")
        assert broker.call(read) == [("message.added", b"m4")]
        c.frame("ACK", {"id": frames["MESSAGE"][1]["ack"]})
        wait_until(lambda: broker.call(lambda: cursor.pending) == 1, what="the removal of m4")
        assert broker.call(read) == [("message.removed", None)]
        assert broker.call(lambda: (cursor.cancelled, cursor.pending)) == (4, 0)
        broker.run(cursor.ack())
        c.close()
        # nothing of the dropped pairs (nor anything read) is left in the store
        assert broker.run(broker.broker.store.read(cursor.key, 0, 100)) == []
    finally:
        broker.stop()


def test_a_cursor_that_shares_messages_stores_a_send_once(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`share_messages` (what a mirror sets): a persistent send's record is the
    message its queue stores, so kahaDB holds its bytes once (both index entries
    at one location). Read back from the store (a window of 2), a send is the same
    message without placements; with `cancel_pairs`, a send read back so keeps its
    removal (it was handed out: the reader's peer must hear of the removal)."""
    from relaymq.feed import MessageRemoved
    from relaymq.feed import cursor as cursor_mod

    monkeypatch.setattr(cursor_mod, "WINDOW", 2)
    broker, _ = start(tmp_path)
    try:
        cursor = broker.run(broker.broker.change_feed.subscribe_durable(
            "share", {MessageAdded, MessageRemoved}))
        broker.call(lambda: (setattr(cursor, "cancel_pairs", True),
                             setattr(cursor, "share_messages", True)))
        c = BlockingStomp(broker.port("stomp"))
        for i in range(6):
            assert c.send("/queue/feed.share", f"s{i}".encode(), foo=str(i))[0] == "RECEIPT"
        wait_until(lambda: broker.call(lambda: cursor.pending) == 6, what="six sends")
        store = broker.broker.store
        queued = broker.run(store.read("queue://feed.share", 0, 10))
        records = broker.run(store.read(cursor.key, 0, 10))
        assert len(queued) == len(records) == 6
        at = broker.call(lambda: [(store.index.location("queue://feed.share", q.seq),
                                   store.index.location(cursor.key, r.seq))
                                  for q, r in zip(queued, records, strict=True)])
        assert all(a is not None and a == b for a, b in at), at

        async def read(n: int) -> list[Any]:
            return [await cursor.get() for _ in range(n)]

        sends = broker.run(read(6))
        assert [e.message.body for e in sends] == [f"s{i}".encode() for i in range(6)]
        assert all(e.destination == Destination.queue("feed.share") for e in sends)
        assert [e.message.properties["foo"] for e in sends] == [str(i) for i in range(6)]
        assert [len(e.placements) for e in sends] == [1, 1, 0, 0, 0, 0]  # 2 in memory
        c.frame("SUBSCRIBE", {"destination": "/queue/feed.share", "id": "1",
                              "ack": "client-individual"})
        for i in range(6):
            cmd, headers, body = c.read()
            assert cmd == "MESSAGE" and body == f"s{i}".encode()
            c.frame("ACK", {"id": headers["ack"]})
        wait_until(lambda: broker.call(lambda: cursor.pending) == 6, what="six removals")
        removed = broker.run(read(6))
        assert [e.kind for e in removed] == ["message.removed"] * 6
        assert broker.call(lambda: cursor.cancelled) == 0
        c.close()
    finally:
        broker.stop()


def test_reading_a_large_persistent_backlog_by_sequence_in_pages(tmp_path: Path) -> None:
    cfg = kaha_config(tmp_path)
    broker = BrokerLoop(cfg)
    try:
        n = 20_000

        async def fill() -> None:
            from relaymq.model.message import Message

            conn = broker.broker.internal_connection()
            q = Destination.queue("feed.backlog")
            last = None
            for i in range(n):
                stored = await conn.submit(Message(f"b{i}".encode(), destination=q, durable=True))
                last = stored or last
            if last is not None:
                await last

        broker.run(fill(), timeout=300)
        seen: list[int] = []
        bodies_ok = True
        after = 0
        while True:
            page = broker.run(broker.broker.read_messages(Destination.queue("feed.backlog"),
                                                          after=after, limit=1000))
            if not page:
                break
            seen += [r.seq for r in page]
            bodies_ok &= all(r.message.body == f"b{r.seq - 1}".encode() for r in page)
            after = page[-1].seq
        assert seen == list(range(1, n + 1)) and bodies_ok
        window = broker.run(broker.broker.read_messages(Destination.queue("feed.backlog"),
                                                        after=14_999, until=15_010))
        assert [r.seq for r in window] == list(range(15_000, 15_011))
    finally:
        broker.stop()


# -- a durable cursor in a real broker process, across kill -9 -----------------------------
def spawn(tmp: Path, port: int, out: Path) -> subprocess.Popen[bytes]:
    cfg = tmp / "activemq.xml"
    cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" brokerName="feedy">
  <persistenceAdapter><kahaDB directory="{tmp / 'kahadb'}"/></persistenceAdapter>
  <transportConnectors><transportConnector uri="stomp://127.0.0.1:{port}"/></transportConnectors>
</broker>""")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, str(HERE / "feed_support.py"), str(cfg), str(out), "rec"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    line = proc.stdout.readline() if proc.stdout else b""
    if line.strip() != b"ready":
        proc.kill()
        raise RuntimeError(f"broker process did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
    return proc


def recorded(out: Path) -> list[dict[str, Any]]:
    """The events the recorder has written whole: a line it is still writing (a
    long one reaches the file in more than one write) has no newline yet."""
    if not out.exists():
        return []
    *whole, _partial = out.read_text().split("\n")
    return [json.loads(line) for line in whole if line.strip()]


@pytest.mark.slow
def test_durable_cursor_survives_kill_9(tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    paused = Path(str(out) + ".paused")
    paused.touch()  # the subscriber is "down": the cursor keeps its events in the store
    port = free_port()
    proc = spawn(tmp_path, port, out)
    try:
        c = BlockingStomp(port)
        for i in range(200):
            assert c.send("/queue/feed.crash", f"c{i}".encode())[0] == "RECEIPT"
        c.close()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert recorded(out) == []
    paused.unlink()
    proc = spawn(tmp_path, port, out)
    try:
        def added() -> list[str]:
            return [e["body"] for e in recorded(out) if e["kind"] == "message.added"]

        wait_until(lambda: len(added()) >= 200, timeout=30, what="the cursor's events after restart")
        assert added() == [f"c{i}" for i in range(200)]
        wait_until(lambda: recorded(out)[-1]["kind"] == "acked", what="the last acknowledgement")
        created = [e for e in recorded(out) if e["kind"] == "destination.created"]
        assert [e["destination"] for e in created] == ["queue://feed.crash"]
        assert not any(e.get("recovered") for e in recorded(out))  # restarts are not captured
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    # acknowledged events are gone: a third life reads nothing again
    before = len(recorded(out))
    proc = spawn(tmp_path, port, out)
    try:
        c = BlockingStomp(port)
        assert c.send("/queue/feed.crash", b"after")[0] == "RECEIPT"
        c.close()
        wait_until(lambda: any(e.get("body") == "after" for e in recorded(out)), what="the new event")
        assert [e.get("body") for e in recorded(out)[before:] if e["kind"] == "message.added"] == ["after"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)


@pytest.mark.slow
def test_a_durable_cursors_acknowledgement_records_survive_kill_9(tmp_path: Path) -> None:
    """The `MessageRemoved` records (their compact stored form) come back after a
    kill -9 with every field: the queue, its sequence number, the reason and the
    message id of the send they remove."""
    out = tmp_path / "events.jsonl"
    paused = Path(str(out) + ".paused")
    paused.touch()
    port = free_port()
    proc = spawn(tmp_path, port, out)
    try:
        c = BlockingStomp(port)
        for i in range(50):
            assert c.send("/queue/feed.acks", f"a{i}".encode())[0] == "RECEIPT"
        assert c.receive_all("/queue/feed.acks") == [f"a{i}".encode() for i in range(50)]
        c.close()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert recorded(out) == []
    paused.unlink()
    proc = spawn(tmp_path, port, out)
    try:
        def of_kind(kind: str) -> list[dict[str, Any]]:
            return [e for e in recorded(out) if e["kind"] == kind and e["dest"] == "queue://feed.acks"]

        wait_until(lambda: len(of_kind("message.removed")) >= 50, timeout=30,
                   what="the acknowledgements after the restart")
        sent = [e for e in of_kind("message.added") if e["body"].startswith("a")]
        assert [e["body"] for e in sent] == [f"a{i}" for i in range(50)]
        gone = of_kind("message.removed")[:50]
        assert [(e["key"], e["seq"], e["reason"], e["id"], e["origin"]) for e in gone] == [
            ("queue://feed.acks", p["placements"][0][1], "acked", p["id"], None) for p in sent]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)


def test_only_documented_event_types_exist() -> None:
    assert {t.__name__ for t in EVENT_TYPES} == {
        "MessageAdded", "MessageRemoved", "DestinationCreated", "DestinationDeleted",
        "SubscriptionCreated", "SubscriptionDeleted", "DestinationConfigured"}
    assert DestinationCreated.kind == "destination.created"
