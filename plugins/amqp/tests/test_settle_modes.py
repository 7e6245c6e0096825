"""AMQP settle modes (AMQP 1.0 §2.6.3, §2.7.3): the broker's attach states the
sender settle mode it honours, and then behaves so."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Delivery, Link, Message
from proton.reactor import LinkOption

MODES = {"settled": Link.SND_SETTLED, "unsettled": Link.SND_UNSETTLED, "mixed": Link.SND_MIXED}


class Modes(LinkOption):
    def __init__(self, snd: int, rcv: int = Link.RCV_FIRST) -> None:
        self.snd, self.rcv = snd, rcv

    def apply(self, link: Any) -> None:
        link.snd_settle_mode = self.snd
        link.rcv_settle_mode = self.rcv


@pytest.mark.parametrize("mode", sorted(MODES))
def test_producer_link_echoes_the_sender_settle_mode(connect: Any, amqp_broker: Any,
                                                     mode: str) -> None:
    c = connect()
    s = c.create_sender("queue://SETTLE.P", options=Modes(MODES[mode]))
    assert s.link.remote_snd_settle_mode == MODES[mode]
    assert s.link.remote_rcv_settle_mode == Link.RCV_FIRST
    d = s.link.send(Message(body=mode))
    if mode == "settled":
        d.settle()  # pre-settled: the broker answers nothing and takes it
    c.wait(lambda: amqp_broker.queue_size("SETTLE.P") == 1 and (mode == "settled" or d.settled),
           msg="the transfer was not taken")
    if mode != "settled":
        assert d.remote_state == Delivery.ACCEPTED


def test_producer_asking_for_rcv_settle_second_is_told_first(connect: Any,
                                                            amqp_broker: Any) -> None:
    c = connect()
    s = c.create_sender("queue://SETTLE.R", options=Modes(Link.SND_UNSETTLED, Link.RCV_SECOND))
    assert s.link.remote_snd_settle_mode == Link.SND_UNSETTLED
    assert s.link.remote_rcv_settle_mode == Link.RCV_FIRST  # the broker settles first
    s.send(Message(body="x"))
    assert amqp_broker.queue_size("SETTLE.R") == 1


@pytest.mark.parametrize("mode", sorted(MODES))
def test_consumer_link_states_how_it_sends(connect: Any, amqp_broker: Any, mode: str) -> None:
    c = connect()
    c.create_sender("queue://SETTLE.C").send(Message(body="m"))
    r = c.create_receiver("queue://SETTLE.C", credit=1, options=Modes(MODES[mode]))
    # settled and unsettled are echoed; for mixed the broker says what it does
    want = Link.SND_SETTLED if mode == "settled" else Link.SND_UNSETTLED
    assert r.link.remote_snd_settle_mode == want
    assert r.receive(timeout=5).body == "m"
    if mode == "settled":  # it arrived pre-settled: nothing for the client to settle
        assert not r.fetcher.unsettled
    else:
        assert not r.fetcher.unsettled[0].settled
        r.accept()
    c.wait(lambda: amqp_broker.queue_size("SETTLE.C") == 0, msg="not acknowledged")


def test_detaching_a_consumer_link_returns_its_unsettled_deliveries_only(
        connect: Any, amqp_broker: Any) -> None:
    """The broker finds the link of each disposition through one map per connection
    of the deliveries its consumer links sent unsettled. Detaching a link that holds
    unsettled deliveries returns exactly those to the queue (what it had accepted
    stays acknowledged), and the links attached before and after it on the same
    session still settle theirs."""
    c = connect()
    for queue, count in (("A", 4), ("B", 2), ("C", 2)):
        sender = c.create_sender(f"queue://SETTLE.{queue}")
        for i in range(count):
            sender.send(Message(body=f"{queue}{i}"))
    ra = c.create_receiver("queue://SETTLE.A", credit=4)
    rb = c.create_receiver("queue://SETTLE.B", credit=2)
    assert [ra.receive(timeout=5).body for _ in range(4)] == ["A0", "A1", "A2", "A3"]
    assert rb.receive(timeout=5).body == "B0"
    ra.accept()
    ra.accept()
    c.wait(lambda: amqp_broker.queue_size("SETTLE.A") == 2, msg="A0, A1 not acknowledged")
    assert amqp_broker.call(lambda: _unsettled_by_link(amqp_broker)) == [2, 2]
    ra.close()  # A2 and A3 unsettled: back to the queue
    c.wait(lambda: amqp_broker.call(lambda: _unsettled_by_link(amqp_broker)) == [2],
           msg="the detached link's deliveries are still mapped")
    assert rb.receive(timeout=5).body == "B1"
    rb.accept()
    rb.accept()
    c.wait(lambda: amqp_broker.queue_size("SETTLE.B") == 0, msg="B not acknowledged")
    for _ in range(3):  # new links (and deliveries) after the detach settle theirs too
        rc = c.create_receiver("queue://SETTLE.C", credit=2)
        assert rc.receive(timeout=5).body == "C0"
        rc.close()
    rc = c.create_receiver("queue://SETTLE.C", credit=2)
    assert [rc.receive(timeout=5).body for _ in range(2)] == ["C0", "C1"]
    rc.accept()
    rc.accept()
    c.wait(lambda: amqp_broker.queue_size("SETTLE.C") == 0, msg="C not acknowledged")
    ra = c.create_receiver("queue://SETTLE.A", credit=4)
    again = [ra.receive(timeout=5) for _ in range(2)]
    assert [m.body for m in again] == ["A2", "A3"]
    assert all(m.delivery_count >= 1 for m in again)  # returned, not new
    ra.accept()
    ra.accept()
    c.wait(lambda: amqp_broker.queue_size("SETTLE.A") == 0, msg="A2, A3 not acknowledged")
    assert amqp_broker.call(lambda: _unsettled_by_link(amqp_broker)) == []


def _unsettled_by_link(broker_thread: Any) -> list[int]:
    """How many unsettled deliveries each consumer link of the broker's one AMQP
    connection has in the connection's map (`LinkHost.sent_deliveries`), by link name; every
    entry's link is a live link of that connection."""
    (connector,) = [c for c in broker_thread.broker.connectors if hasattr(c, "connections")]
    (sock,) = connector.connections
    conn = sock.conn
    counts: dict[str, int] = {}
    for link, _did in conn.sent_deliveries.values():
        assert not link.closed and conn.links.get(link.link) is link
        counts[link.name] = counts.get(link.name, 0) + 1
    return [counts[name] for name in sorted(counts)]
