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
