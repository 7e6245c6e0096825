"""ActiveMQ's `activemq.exclusive` consumer option on a Solace `exclusive` queue: the
queue already has one active consumer, the first bound, which stays active until
it leaves; the option puts a standby ahead of those without it when the next
active one is chosen, and never limits what the active one receives. The broker
runs in this process (management's `active` flags are read), reached with stomp.py
over real sockets."""

from __future__ import annotations

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")

from .support import Client, EmbeddedBroker, broker_xml  # noqa: E402

CONFIG = broker_xml("excl", '<policyEntry queue="audit.>" accessType="exclusive"/>')


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = EmbeddedBroker(tmp_path_factory.mktemp("excl"), CONFIG)
    b.start()
    yield b
    b.stop()


def active(b: EmbeddedBroker, queue: str) -> dict[str, bool]:
    """Management's active flag of each consumer on `queue`, by client id."""
    return {c.client_id: c.active for c in b.call(lambda br: br.management.consumers(queue))}


def test_an_exclusive_option_standby_neither_takes_over_nor_throttles_the_active_one(
        broker) -> None:
    queue = "audit.option"
    first, plain, flagged = (Client(broker, n, client_id=n) for n in ("first", "plain", "flagged"))
    first.subscribe(f"/queue/{queue}", id="1", ack="client", **{"activemq.prefetchSize": "3"})
    plain.subscribe(f"/queue/{queue}", id="1", ack="client")
    flagged.subscribe(f"/queue/{queue}", id="1", ack="client",
                      **{"activemq.exclusive": "true", "activemq.prefetchSize": "1"})
    assert active(broker, queue) == {"first": True, "plain": False, "flagged": False}
    p = Client(broker, "p")
    for i in range(6):
        p.send(f"/queue/{queue}", f"m{i}")
    assert first.wait(3) == ["m0", "m1", "m2"]  # its prefetch is full
    first.ack(first.messages[2])  # cumulative: room for three more, all for `first`
    assert first.wait(6) == [f"m{i}" for i in range(6)]
    assert plain.messages == [] and flagged.messages == []
    first.close()  # m3..m5 unacknowledged: they go to the next active consumer
    # the standby that asked for activemq.exclusive comes before the one bound earlier
    assert flagged.wait(1) == ["m3"]
    assert active(broker, queue) == {"plain": False, "flagged": True}
    for n in (2, 3):  # prefetch 1: the next comes once the last is acknowledged
        flagged.ack(flagged.messages[n - 2])
        flagged.wait(n)
    assert flagged.bodies() == ["m3", "m4", "m5"]
    assert all(m.headers.get("redelivered") == "true" for m in flagged.messages)
    flagged.ack(flagged.messages[2])
    p.send(f"/queue/{queue}", "marker")
    assert flagged.wait_for("marker")[-1] == "marker"
    assert plain.messages == []
    for c in (plain, flagged, p):
        assert not c.errors, c.errors[0].headers
        c.close()


def test_a_standby_takes_over_before_a_consumer_that_binds_later(broker) -> None:
    """The active consumer leaves while nothing waits: the standby is the active one
    from then on, not a consumer that binds after it left."""
    queue = "audit.turn"
    first, standby = (Client(broker, n, client_id=n) for n in ("first", "standby"))
    for c in (first, standby):
        c.subscribe(f"/queue/{queue}", id="1")
    first.close()
    later = Client(broker, "later", client_id="later")
    later.subscribe(f"/queue/{queue}", id="1", **{"activemq.priority": "9"})
    assert active(broker, queue) == {"standby": True, "later": False}
    p = Client(broker, "p")
    p.send(f"/queue/{queue}", "m")
    assert standby.wait(1) == ["m"]
    p.send(f"/queue/{queue}", "marker")
    assert standby.wait_for("marker") == ["m", "marker"]
    assert later.messages == []
    for c in (standby, later, p):
        c.close()
