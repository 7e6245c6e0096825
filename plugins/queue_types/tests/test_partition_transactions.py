"""Local transactions on a partitioned queue and a partitioned dead message queue, in
a `relaymq run` process over STOMP (BEGIN/SEND/ACK/COMMIT/ABORT)."""

from __future__ import annotations

import zlib

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")

from relaymq.testing import wait_until  # noqa: E402

from .support import Broker, Client  # noqa: E402

CONFIG = """<broker xmlns="http://activemq.apache.org/schema/core" brokerName="ptx"
        dataDirectory="{data}">
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue="tx.>" partitionCount="4" partitionRebalanceDelay="100"
                 partitionMaxHandoffTime="60000"/>
    <policyEntry queue="src.>" partitionCount="4" deadMessageQueue="dead.src"
                 maxRedelivery="0" dmqEligible="true"/>
    <policyEntry queue="dead.>" partitionCount="4" partitionRebalanceDelay="100"
                 partitionMaxHandoffTime="60000"/>
  </policyEntries></policyMap></destinationPolicy>
  <persistenceAdapter><kahaDB directory="{data}/kahadb"/></persistenceAdapter>
  <destinations><queue physicalName="dead.src"/></destinations>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp}"/>
  </transportConnectors>
</broker>"""

COUNT = 4


def key_of(partition: int, tag: str) -> str:
    """A key whose messages go to `partition` of a 4-partition queue."""
    i = 0
    while zlib.crc32(f"{tag}{i}".encode()) % COUNT != partition:
        i += 1
    return f"{tag}{i}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = Broker(tmp_path_factory.mktemp("ptx"), CONFIG)
    b.start()
    yield b
    b.stop()


def per_key(bodies: list[str]) -> dict[str, list[int]]:
    """`KEY:N` bodies -> key -> the N in the order received."""
    out: dict[str, list[int]] = {}
    for b in bodies:
        key, n = b.split(":")
        out.setdefault(key, []).append(int(n))
    return out


def wait_rebalanced(broker: Broker, queue: str, consumers: int, seen: int = 0) -> None:
    text = f"queue://{queue}: rebalanced {COUNT} partitions over {consumers} consumers"
    wait_until(lambda: broker.output().count(text) > seen, repr(text), 20)


def test_transacted_sends_and_acks_keep_each_keys_order_and_aborts_redeliver_to_the_owner(
        broker) -> None:
    keys = [key_of(p, "t") for p in range(COUNT)]
    a = Client(broker, "a")
    a.subscribe("/queue/tx.orders", id="1", ack="client-individual")
    p = Client(broker, "p")
    # transacted sends are invisible until COMMIT
    p.begin("s1")
    for i in range(12):
        p.send("/queue/tx.orders", f"{keys[i % COUNT]}:{i}", JMSXGroupID=keys[i % COUNT],
               transaction="s1", persistent="true")
    p.send("/queue/tx.orders", f"{keys[0]}:100", JMSXGroupID=keys[0], persistent="true")
    assert a.wait_for(f"{keys[0]}:100") == [f"{keys[0]}:100"]
    p.commit("s1")
    a.wait(13)
    assert sorted(a.bodies()[1:], key=lambda s: int(s.split(":")[1])) == \
        [f"{keys[i % COUNT]}:{i}" for i in range(12)]
    assert per_key(a.bodies()[1:]) == {k: list(range(j, 12, COUNT)) for j, k in enumerate(keys)}
    a.ack(a.messages[0])

    # a second consumer: two partitions each after the rebalance
    seen = broker.output().count("queue://tx.orders: rebalanced 4 partitions over 2")
    b = Client(broker, "b")
    b.subscribe("/queue/tx.orders", id="1", ack="client-individual")
    # a's twelve are unacknowledged: the moving partitions wait for it (hand-off);
    # it acknowledges them in a transaction and commits
    wait_rebalanced(broker, "tx.orders", 2, seen)
    a.begin("c1")
    for m in a.messages[1:]:
        a.with_receipt(lambda rid, m=m: a.conn.ack(m.headers["ack"], transaction="c1",
                                                   receipt=rid))
    a.commit("c1")

    # from now on each key goes to one of the two; both abort, then both commit
    before = {c.name: len(c.messages) for c in (a, b)}
    for i in range(20, 36):
        key = keys[i % COUNT]
        p.send("/queue/tx.orders", f"{key}:{i}", JMSXGroupID=key, persistent="true")
    wait_until(lambda: len(a.messages) + len(b.messages) - sum(before.values()) >= 16,
               "the 16 new messages", 20)
    first = {c.name: c.messages[before[c.name]:] for c in (a, b)}
    assert first["a"] and first["b"], "both consumers own partitions"
    owner = {}
    for name, frames in first.items():
        for k in per_key([f.body for f in frames]):
            assert k not in owner, f"{k} went to two consumers"
            owner[k] = name
        assert all(seqs == sorted(seqs) for seqs in per_key([f.body for f in frames]).values())
    for c in (a, b):
        c.begin(f"abort-{c.name}")
        for m in first[c.name]:
            c.with_receipt(lambda rid, c=c, m=m: c.conn.ack(
                m.headers["ack"], transaction=f"abort-{c.name}", receipt=rid))
        c.abort(f"abort-{c.name}")
    for c in (a, b):  # every aborted ack comes back to the same consumer, redelivered, in order
        n = len(first[c.name])
        c.wait(before[c.name] + 2 * n)
        again = c.messages[before[c.name] + n:]
        assert [m.body for m in again] == [m.body for m in first[c.name]], c.name
        assert all(m.headers.get("redelivered") == "true" for m in again)
        c.begin(f"commit-{c.name}")
        for m in again:
            c.with_receipt(lambda rid, c=c, m=m: c.conn.ack(
                m.headers["ack"], transaction=f"commit-{c.name}", receipt=rid))
        c.commit(f"commit-{c.name}")
    # committed: nothing comes back; a last message per key reaches the same owner
    totals = {c.name: len(c.messages) for c in (a, b)}
    for key in keys:
        p.send("/queue/tx.orders", f"{key}:99", JMSXGroupID=key, persistent="true")
    for key in keys:
        client = a if owner[key] == "a" else b
        client.wait_for(f"{key}:99")
    for c in (a, b):
        late = [m.body for m in c.messages[totals[c.name]:]]
        assert sorted(late) == sorted(f"{k}:99" for k in keys if owner[k] == c.name), late
    for x in (p, a, b):
        x.close()


def test_a_hand_off_waits_for_an_open_transaction_of_the_old_owner(broker) -> None:
    # four partitions, two consumers: the first keeps 0 and 1, the newcomer gets 2 and 3
    held, free = key_of(2, "h"), key_of(3, "f")
    a = Client(broker, "a")
    a.subscribe("/queue/tx.handoff", id="1", ack="client-individual")
    p = Client(broker, "p")
    for i in range(2):
        p.send("/queue/tx.handoff", f"{held}:{i}", JMSXGroupID=held, persistent="true")
    a.wait(2)
    a.begin("open")
    for m in a.messages:
        a.with_receipt(lambda rid, m=m: a.conn.ack(m.headers["ack"], transaction="open",
                                                   receipt=rid))
    seen = broker.output().count("queue://tx.handoff: rebalanced 4 partitions over 2")
    b = Client(broker, "b")
    b.subscribe("/queue/tx.handoff", id="1", ack="client-individual")
    wait_rebalanced(broker, "tx.handoff", 2, seen)
    p.send("/queue/tx.handoff", f"{held}:2", JMSXGroupID=held, persistent="true")
    p.send("/queue/tx.handoff", f"{free}:0", JMSXGroupID=free, persistent="true")
    # the free partition moved at once; the held one waits for a's transaction
    # (frames reach b in dispatch order, so `held:2` would have come first)
    assert b.wait_for(f"{free}:0") == [f"{free}:0"]
    assert len(a.messages) == 2
    a.abort("open")
    # the aborted acks return to the partition's consumer, now b, before what followed
    b.wait(4)
    assert per_key(b.bodies()) == {free: [0], held: [0, 1, 2]}
    assert [m.headers.get("redelivered") for m in b.messages[1:3]] == ["true", "true"]
    assert len(a.messages) == 2
    for x in (p, a, b):
        x.close()


def test_a_partitioned_dead_message_queue_keeps_the_keys(broker) -> None:
    # three keys over four partitions: a message without its key would go to the
    # partition of its sequence number, so each key's messages would be spread
    keys = [key_of(p, "d") for p in range(3)]
    x = Client(broker, "x")
    x.subscribe("/queue/dead.src", id="1")
    seen = broker.output().count("queue://dead.src: rebalanced 4 partitions over 2")
    y = Client(broker, "y")
    y.subscribe("/queue/dead.src", id="1")
    wait_rebalanced(broker, "dead.src", 2, seen)
    c = Client(broker, "c")
    c.subscribe("/queue/src.orders", id="1", ack="client-individual")
    p = Client(broker, "p")
    sent = []
    for i in range(15):
        key = keys[i % 3]
        sent.append(f"{key}:{i}")
        p.send("/queue/src.orders", f"{key}:{i}", JMSXGroupID=key, persistent="true")
    c.wait(15)
    for m in c.messages:  # maxRedelivery 0: the first failure dead-letters
        c.conn.nack(m.headers["ack"])
    wait_until(lambda: len(x.messages) + len(y.messages) >= 15, "15 in the DMQ", 20)
    got = x.messages + y.messages
    assert sorted(m.body for m in got) == sorted(sent)
    assert all(m.headers["original-destination"] == "/queue/src.orders" for m in got)
    # each key's five messages on one DMQ consumer, in order, and both consumers have
    # keys: the DMQ spread the messages over its partitions by their key
    xs, ys = per_key(x.bodies()), per_key(y.bodies())
    assert xs and ys and not set(xs) & set(ys), (xs, ys)
    for seqs in [*xs.values(), *ys.values()]:
        assert seqs == sorted(seqs) and len(seqs) == 5
    for client in (p, c, x, y):
        client.close()
