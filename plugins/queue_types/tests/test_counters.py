"""The queue types' counters say exactly what docs/queue-types.md says: `replaced`
(last values superseded by newer ones) and `discarded` (messages that leave for no
dead message queue), both in management's `DestinationInfo`, and management's
`dead_lettered` counts a discard as it counts the kernel's discarding strategy. The broker runs in this process (its counters are
read through management), reached by stomp.py over real sockets."""

from __future__ import annotations

import time

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")

from .support import Client, EmbeddedBroker, broker_xml  # noqa: E402

CONFIG = broker_xml("counters", """
    <policyEntry queue="prices.>" queueType="lastValue"/>
    <policyEntry queue="dmq.>" deadMessageQueue="dmq.DMQ" maxRedelivery="0"/>""",
                    extra='<destinations><queue physicalName="dmq.DMQ"/></destinations>')


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = EmbeddedBroker(tmp_path_factory.mktemp("counters"), CONFIG)
    b.start()
    yield b
    b.stop()


def counters(b: EmbeddedBroker, name: str) -> dict[str, int]:
    async def read(br):  # type: ignore[no-untyped-def]
        info = await br.management.destination(name)
        queue = br.management.queue(name)  # the queue type's own attributes say the same
        assert (info.discarded, info.replaced) == (getattr(queue, "discarded", 0),
                                                   getattr(queue, "replaced", 0))
        return {"discarded": info.discarded, "replaced": info.replaced,
                "dead_lettered": info.dead_lettered, "expired": info.expired, "depth": info.depth}
    return b.call(read)  # type: ignore[no-any-return]


def test_discards_count_in_discarded_and_in_dead_lettered(broker) -> None:
    """Not DMQ-eligible: an expired message and one NACKed past maxRedelivery are
    discarded; an eligible one goes to the DMQ. Each is dead-lettered for management."""
    c = Client(broker, "c")
    past = str(int(time.time() * 1000) - 1000)
    c.send("/queue/dmq.q", "expired", expires=past, persistent="true")
    c.send("/queue/dmq.q", "nacked", persistent="true")
    c.send("/queue/dmq.q", "to the DMQ", persistent="true", JMS_Solace_DeadMsgQueueEligible="true")
    c.subscribe("/queue/dmq.q", id="1", ack="client-individual")
    got = c.wait(2)
    assert got == ["nacked", "to the DMQ"]  # the expired one never came
    for m in c.messages:
        c.conn.nack(m.headers["ack"])
    c.subscribe("/queue/dmq.DMQ", id="2")
    assert c.wait(3)[2] == "to the DMQ"
    assert counters(broker, "dmq.q") == {"discarded": 2, "replaced": 0, "dead_lettered": 3,
                                         "expired": 1, "depth": 0}
    c.close()


def test_replaced_counts_each_superseded_last_value_once(broker) -> None:
    c = Client(broker, "c")
    for i in range(4):
        c.send("/queue/prices.count", f"v{i}", persistent="true")  # v0..v2 replaced waiting
    c.subscribe("/queue/prices.count", id="1", ack="client-individual",
                **{"activemq.prefetchSize": "1"})
    assert c.wait(1) == ["v3"]
    c.send("/queue/prices.count", "v4", persistent="true")  # waits; v3 is held
    c.conn.nack(c.messages[0].headers["ack"])  # v3 comes back superseded: replaced
    assert c.wait(2)[1] == "v4"
    c.ack(c.messages[1])
    assert counters(broker, "prices.count") == {"discarded": 0, "replaced": 4, "dead_lettered": 0,
                                                "expired": 0, "depth": 0}
    c.close()
