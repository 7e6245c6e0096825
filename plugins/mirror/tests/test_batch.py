"""Mirror events several to a transfer between RelayMQ brokers
(`relaymq_mirror.batch`): offered by the target's link property, applied event by event
on the target, settled per transfer with the refused events named. Brokers run
in this process (real AMQP connections on real sockets); A's events wait in its
store-and-forward queue while B is not up yet, so they go out as one run."""

from __future__ import annotations

from typing import Any

from artemis_side import ARTEMIS_NODE, artemis_link, control, data_message
from mirrortools import BrokerThread, make_config, mirror_element, receive, send
from proton import Message, symbol
from relaymq.testing.net import free_port
from relaymq.testing.waits import wait_until
from relaymq_amqp import engine as pn
from relaymq_amqp import link_handlers
from relaymq_mirror import batch


def test_a_relaymq_pair_sends_a_run_of_events_in_few_transfers(brokers: Any) -> None:
    port = free_port()
    a = brokers(mirrors=[mirror_element(f"tcp://127.0.0.1:{port}", "B")])
    bodies = [f"m{i}" for i in range(300)]
    send(a.url, "queue://runs", bodies)  # captured while B is down
    b = brokers(port=port)
    wait_until(lambda: a.mirror_status("B").get("snf_depth") == 0
               and a.mirror_status("B").get("accepted", 0) >= 301, "A's backlog accepted by B",
               detail=lambda: repr(a.mirror_status("B")))
    st = a.mirror_status("B")
    assert st["batching"] is True
    assert st["rejected"] == 0
    # addAddress and createQueue (one event, two messages) and 300 sends: far
    # fewer transfers than messages
    assert st["sent"] >= 302 and st["transfers"] <= st["sent"] // 10, st
    got = receive(b.url, "queue://runs", 300)
    assert [m.body for m in got] == bodies  # in order, each once
    # consuming on A mirrors the postAcks, batched too: B's copies go
    for m in receive(a.url, "queue://runs", 300):
        assert m.body in bodies
    wait_until(lambda: b.depth("queue://runs") == 0, "B's copies acknowledged",
               detail=lambda: f"{b.depth('queue://runs')} left; {a.mirror_status('B')}")


def test_a_source_can_be_told_not_to_batch(brokers: Any) -> None:
    port = free_port()
    a = brokers(mirrors=[mirror_element(f"tcp://127.0.0.1:{port}", "B", batch="false")])
    send(a.url, "queue://single", [f"s{i}" for i in range(20)])
    brokers(port=port)
    wait_until(lambda: a.mirror_status("B").get("accepted", 0) >= 21, "accepted one by one",
               detail=lambda: repr(a.mirror_status("B")))
    st = a.mirror_status("B")
    assert st["batching"] is False and st["transfers"] == st["sent"]


async def test_a_batch_is_applied_in_order_and_refuses_only_its_bad_events(brokers: Any) -> None:
    b = brokers()
    conn, sender = await artemis_link(f"tcp://{b.address}", caps=["amq.mirror"])
    try:
        assert sender.remote_properties.get(batch.PROPERTY) is True
        wrong_type = Message(body="x", durable=True)
        wrong_type.annotations = {symbol("x-opt-amq-mr-ev-type"): "postAck"}  # not a symbol
        events = [data_message("first", 7001, **{"x-opt-amq-mr-dst": "bq"}),
                  bytes(wrong_type.encode()),
                  data_message("second", 7002, **{"x-opt-amq-mr-dst": "bq"}),
                  data_message("x", "not-a-long", **{"x-opt-amq-mr-dst": "bq"}),
                  control("postAck", 7001, **{"x-opt-amq-mr-adr": "bq", "x-opt-amq-mr-qu": "bq"})]
        r = await sender.send(batch.pack(events))
        assert r.state == "rejected"
        assert batch.refused_positions(r.condition) == {1, 3}
        assert "2 event(s) of the batch refused" in str(r.condition)
        assert "must be a symbol" in str(r.condition) and "must be a long" in str(r.condition)
        # the others were applied in order: both sends, then the postAck of the first
        assert [m.body for m in receive(b.url, "queue://bq", 1)] == ["second"]
        assert b.depth("queue://bq") == 0
        # a whole batch of good events is accepted
        r = await sender.send(batch.pack([data_message(f"g{i}", 7100 + i, **{"x-opt-amq-mr-dst": "bq"})
                                          for i in range(5)]))
        assert r.state == "accepted"
        assert [m.body for m in receive(b.url, "queue://bq", 5)] == [f"g{i}" for i in range(5)]
        # a batch whose framing is wrong is refused whole with the reason; the link goes on
        good = batch.pack([data_message("late", 7200, **{"x-opt-amq-mr-dst": "bq"}),
                           data_message("later", 7201, **{"x-opt-amq-mr-dst": "bq"})])
        r = await sender.send(good[:-3])
        assert r.state == "rejected" and "mirror batch" in str(r.condition)
        assert batch.refused_positions(r.condition) is None
        r = await sender.send(data_message("after", 7300, **{"x-opt-amq-mr-dst": "bq"}))
        assert r.state == "accepted"
        assert [m.body for m in receive(b.url, "queue://bq", 1)] == ["after"]
        assert b.depth("queue://bq") == 0  # nothing of the broken batch was applied
    finally:
        await conn.close()


class RefusingTarget:
    """A target that offers batching and refuses the second event of every batch
    (naming it), accepting single events: what the source counts."""

    address_prefixes = ("$ACTIVEMQ_ARTEMIS_MIRROR",)
    transfers: list[int] = []
    properties: dict[str, Any] = {"x-opt-amq-bkr-id": ARTEMIS_NODE, batch.PROPERTY: True}

    def __init__(self, link: Any) -> None:
        self.link = link

    def attach(self) -> None:
        self.link.open(properties=self.properties, offered_capabilities=["amq.mirror"],
                       credit=1000)

    def on_delivery(self, delivery: Any) -> None:
        data = self.link.receive(delivery)
        if data is None:
            return
        events = batch.unpack(data)
        self.transfers.append(len(events) if events is not None else 1)
        if events is not None and len(events) > 1:
            self.link.settle(delivery, pn.REJECTED, pn.Condition(
                "amqp:invalid-field", "the second is wrong", {symbol(batch.REFUSED): [1]}))
        else:
            self.link.accept(delivery)
        self.link.flow(1)

    def on_flow(self) -> None:
        pass

    def on_detach(self, closed: bool) -> None:
        pass


def _backlog_then_target(brokers: Any, handler: type[RefusingTarget], queue: str,
                         count: int) -> tuple[BrokerThread, BrokerThread]:
    """A with `count` sends to `queue` captured while its target is down, then
    the target B, whose mirror links `handler` answers (in place before A can
    connect); returns once A's backlog is settled."""
    handler.transfers.clear()
    port = free_port()
    a = brokers(mirrors=[mirror_element(f"tcp://127.0.0.1:{port}", "B")])
    send(a.url, queue, [f"m{i}" for i in range(count)])
    b = BrokerThread(make_config(port=port),
                     setup=lambda br: link_handlers.register(br, "amq.mirror", handler))
    try:
        wait_until(lambda: a.mirror_status("B").get("snf_depth") == 0
                   and a.mirror_status("B").get("sent", 0) >= count + 2, "every event settled",
                   detail=lambda: repr(a.mirror_status("B")))
    except BaseException:
        b.stop()
        raise
    return a, b


def test_the_source_counts_only_the_events_a_target_refused(brokers: Any) -> None:
    a, b = _backlog_then_target(brokers, RefusingTarget, "queue://counted", 50)
    try:
        st = a.mirror_status("B")
        batches = [n for n in RefusingTarget.transfers if n > 1]
        assert batches, RefusingTarget.transfers
        assert st["rejected"] == len(batches)  # one refused event per batch, not the batch
        # every event is settled: the queue's creation (two messages) and 50 sends
        assert st["accepted"] == 51 and st["sent"] == 52
    finally:
        b.stop()


class PlainTarget(RefusingTarget):
    """A target whose answer does not say it reads batches (as Artemis')."""

    transfers: list[int] = []
    properties = {"x-opt-amq-bkr-id": ARTEMIS_NODE}


def test_a_target_that_does_not_read_batches_gets_each_event_alone(brokers: Any) -> None:
    a, b = _backlog_then_target(brokers, PlainTarget, "queue://alone", 20)
    try:
        st = a.mirror_status("B")
        assert st["batching"] is False and st["transfers"] == st["sent"] == 22
        assert PlainTarget.transfers == [1] * 22  # each event its own message
        assert st["rejected"] == 0
    finally:
        b.stop()
