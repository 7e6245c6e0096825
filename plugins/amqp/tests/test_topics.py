"""Topics, durable subscriptions (the Qpid JMS way), selectors, browsing, dynamic
nodes and the anonymous relay, end to end with proton clients."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Data, Message, symbol
from proton.reactor import Copy, DurableSubscription, DynamicNodeProperties, LinkOption, Selector
from proton.utils import LinkDetached
from relaymq.spi.persistence import subscription_key
from relaymq.testing import wait_until


class Capabilities(LinkOption):
    """Terminus capabilities as Qpid JMS sends them (`queue`, `topic`, ...)."""

    def __init__(self, *caps: str) -> None:
        self.caps = caps

    def apply(self, link: Any) -> None:
        t = link.source if link.is_receiver else link.target
        t.capabilities.put_array(False, Data.SYMBOL)
        t.capabilities.enter()
        for cap in self.caps:
            t.capabilities.put_symbol(symbol(cap))
        t.capabilities.exit()


def obj(data: Data) -> Any:
    """The value a proton Data holds (its cursor starts before the first node)."""
    data.rewind()
    data.next()
    return data.get_object()


def wait_detached(client: Any, amqp_broker: Any, key: str) -> None:
    """Let `client` write its detach until the broker took it: the subscription `key`
    has no consumer (raises proton's Timeout)."""
    subs = amqp_broker.broker.region.subscriptions
    client.wait(lambda: amqp_broker.call(lambda: key in subs and not subs[key].consumers),
                timeout=20, msg=f"the subscription {key} without consumers")


def test_topic_fans_out_to_every_subscriber(connect: Any) -> None:
    c = connect()
    r1 = c.create_receiver("topic://news", credit=10, name="a")
    r2 = c.create_receiver("news", credit=10, name="b", options=Capabilities("topic"))
    s = c.create_sender("topic://news")
    for i in range(3):
        s.send(Message(body=i))
    for r in (r1, r2):
        assert [r.receive(timeout=5).body for _ in range(3)] == [0, 1, 2]


def test_bare_name_with_topic_capability_is_a_topic(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    r = c.create_receiver("prices", credit=5, options=Capabilities("topic"))
    assert r.link.remote_source.address == "prices"
    c.create_sender("prices", options=Capabilities("topic")).send(Message(body="p"))
    assert r.receive(timeout=5).body == "p"
    assert amqp_broker.queue_size("prices") == 0  # not a queue


def test_subscribers_get_only_what_was_published_after_they_attached(connect: Any) -> None:
    c = connect()
    s = c.create_sender("topic://late")
    s.send(Message(body="before"))
    r = c.create_receiver("topic://late", credit=5)
    s.send(Message(body="after"))
    assert r.receive(timeout=5).body == "after"


def test_durable_subscription_survives_client_restarts(connect: Any, amqp_broker: Any) -> None:
    key = subscription_key("client-A", "sub1")
    c1 = connect(container_id="client-A")
    r = c1.create_receiver("topic://events", name="sub1", credit=10, options=DurableSubscription())
    pub = connect()
    s = pub.create_sender("topic://events")
    s.send(Message(body="one"))
    assert r.receive(timeout=5).body == "one"
    r.accept()
    r.link.detach()  # closed=false: the subscription stays
    wait_detached(c1, amqp_broker, key)
    c1.close()
    s.send(Message(body="two"))
    s.send(Message(body="three"))
    assert key in amqp_broker.call(lambda: dict(amqp_broker.broker.region.subscriptions))

    c2 = connect(container_id="client-A")
    r2 = c2.create_receiver("topic://events", name="sub1", credit=10, options=DurableSubscription())
    assert [r2.receive(timeout=5).body for _ in range(2)] == ["two", "three"]
    r2.accept()
    r2.accept()
    r2.close()  # closed=true: unsubscribe
    wait_until(lambda: key not in amqp_broker.call(
        lambda: dict(amqp_broker.broker.region.subscriptions)), "the subscription removed")


def test_durable_subscription_lookup_by_name_and_unsubscribe(connect: Any, amqp_broker: Any) -> None:
    """Qpid JMS unsubscribes by attaching with the subscription name and no address."""
    c = connect(container_id="client-B")
    r = c.create_receiver("topic://t", name="mysub", credit=1,
                          options=[DurableSubscription(), Selector("color = 'red'")])
    r.link.detach()
    key = subscription_key("client-B", "mysub")
    wait_detached(c, amqp_broker, key)
    c.close()

    c2 = connect(container_id="client-B")
    lookup = c2.create_receiver(None, name="mysub", credit=0)
    src = lookup.link.remote_source
    assert src.address == "topic://t" and src.durability == src.DELIVERIES
    assert "color = 'red'" in str(obj(src.filter))
    lookup.close()
    wait_until(lambda: key not in amqp_broker.call(
        lambda: dict(amqp_broker.broker.region.subscriptions)), "the subscription removed")
    with pytest.raises(LinkDetached, match="not-found"):
        c2.create_receiver(None, name="mysub", credit=0)


def test_sole_connection_for_container_makes_the_container_id_exclusive(connect: Any) -> None:
    caps = [symbol("sole-connection-for-container")]
    connect(container_id="only-me", desired_capabilities=caps)
    with pytest.raises(Exception, match="invalid-field"):
        c = connect(container_id="only-me", desired_capabilities=caps)
        c.create_sender("queue://x")
    connect(container_id="only-me")  # without the capability ids may repeat


def test_selector_filters_messages(connect: Any) -> None:
    c = connect()
    r = c.create_receiver("queue://sel", credit=10, options=Selector("color = 'red' AND n > 1"))
    assert "color" in str(obj(r.link.remote_source.filter))  # the broker echoes it
    s = c.create_sender("queue://sel")
    for n, color in [(1, "red"), (2, "blue"), (3, "red")]:
        s.send(Message(body=n, properties={"color": color, "n": n}))
    assert r.receive(timeout=5).body == 3
    r.accept()
    rest = c.create_receiver("queue://sel", credit=10, name="all")
    assert sorted(rest.receive(timeout=5).body for _ in range(2)) == [1, 2]


def test_jms_selector_filter_key_and_header_fields(connect: Any) -> None:
    c = connect()
    r = c.create_receiver("queue://jsel", credit=10, options=Selector("JMSPriority > 5", "jms-selector"))
    s = c.create_sender("queue://jsel")
    s.send(Message(body="low", priority=1))
    s.send(Message(body="high", priority=8))
    assert r.receive(timeout=5).body == "high"


def test_selectors_compare_ulong_and_symbol_properties(connect: Any) -> None:
    from proton import ulong

    c = connect()
    s = c.create_sender("queue://typed-sel")
    s.send(Message(body="match", properties={"n": ulong(7), "kind": symbol("order")}))
    s.send(Message(body="other", properties={"n": ulong(8), "kind": symbol("quote")}))
    r = c.create_receiver("queue://typed-sel", credit=10, name="n",
                          options=Selector("n = 7 AND kind = 'order'"))
    m = r.receive(timeout=5)
    assert m.body == "match"
    assert type(m.properties["n"]) is ulong  # the consumer still gets the AMQP types
    r.accept()
    high = c.create_receiver("queue://typed-sel", credit=10, name="high", options=Selector("n > 7"))
    assert high.receive(timeout=5).body == "other"


def test_invalid_selector_refuses_the_link(connect: Any) -> None:
    c = connect()
    with pytest.raises(LinkDetached) as err:
        c.create_receiver("queue://bad", credit=1, options=Selector("color = = 'x'"))
    assert err.value.condition == "amqp:invalid-field"
    assert "offset" in str(err.value)
    c.create_sender("queue://bad").send(Message(body="still fine"))  # the connection lives on


def test_browsing_copies_without_consuming(connect: Any, amqp_broker: Any) -> None:
    c = connect()
    s = c.create_sender("queue://browse")
    for i in range(3):
        s.send(Message(body=i))
    b = c.create_receiver("queue://browse", credit=10, options=Copy())
    assert [b.receive(timeout=5).body for _ in range(3)] == [0, 1, 2]
    b.link.drain(10)
    c.wait(lambda: not b.link.draining(), timeout=5)  # drained: the browse is over
    assert amqp_broker.queue_size("browse") == 3
    r = c.create_receiver("queue://browse", credit=10, name="consumer")
    assert [r.receive(timeout=5).body for _ in range(3)] == [0, 1, 2]


def test_dynamic_receiver_gets_a_temporary_queue_for_replies(connect: Any) -> None:
    c = connect()
    replies = c.create_receiver(None, dynamic=True, credit=5)
    address = replies.link.remote_source.address
    assert address and address.startswith("temp-queue://")
    c.create_sender(address).send(Message(body="reply"))
    assert replies.receive(timeout=5).body == "reply"


def test_dynamic_sender_and_temporary_topic(connect: Any) -> None:
    c = connect()
    s = c.create_sender(None, options=[DynamicTarget(), Capabilities("temporary-topic")])
    address = s.link.remote_target.address
    assert address.startswith("temp-topic://")
    r = c.create_receiver(address, credit=5)
    s.send(Message(body="t"))
    assert r.receive(timeout=5).body == "t"


class DynamicTarget(LinkOption):
    def apply(self, link: Any) -> None:
        link.target.dynamic = True
        link.target.address = None


def test_temporary_queue_goes_away_with_its_connection(connect: Any) -> None:
    owner = connect()
    address = owner.create_receiver(None, dynamic=True, credit=1).link.remote_source.address
    other = connect()
    other.create_sender(address, name="first").send(Message(body="ok"))
    owner.close()
    with pytest.raises(LinkDetached, match="not-found"):
        other.create_sender(address, name="second")


def test_anonymous_relay_routes_by_to(connect: Any) -> None:
    c = connect()
    assert "ANONYMOUS-RELAY" in str(c.conn.remote_offered_capabilities)
    assert c.conn.remote_properties[symbol("queue-prefix")] == "queue://"
    q = c.create_receiver("queue://relay-q", credit=5)
    t = c.create_receiver("topic://relay-t", credit=5)
    relay = c.create_sender(None)
    relay.send(Message(address="queue://relay-q", body="to queue"))
    relay.send(Message(address="topic://relay-t", body="to topic"))
    relay.send(Message(address="relay-t", body="jms dest annotation",
                       annotations={symbol("x-opt-jms-dest"): 1}))
    assert q.receive(timeout=5).body == "to queue"
    assert t.receive(timeout=5).body == "to topic"
    assert t.receive(timeout=5).body == "jms dest annotation"


def test_relay_to_a_temporary_queue_that_is_gone_is_rejected_and_the_relay_lives_on(
        connect: Any, amqp_broker: Any) -> None:
    from proton import Delivery

    owner = connect()
    gone = owner.create_receiver(None, dynamic=True, credit=1, name="gone")
    address = gone.link.remote_source.address
    owner.close()
    c = connect()
    relay = c.create_sender(None, name="relay")
    d = relay.link.send(Message(address=address, body="to nobody"))
    c.wait(lambda: d.settled, msg="the refused transfer is settled")
    assert d.remote_state == Delivery.REJECTED
    assert d.remote.condition is not None and d.remote.condition.name == "amqp:not-found"
    relay.send(Message(address="queue://relay-after", body="still works"))
    assert relay.link.remote_condition is None
    assert amqp_broker.queue_size("relay-after") == 1


def test_presettled_relay_refusal_keeps_the_relay_open(make_broker: Any, connect: Any,
                                                       refusing_writes: Any) -> None:
    from proton.reactor import AtMostOnce

    bt = make_broker(setup=refusing_writes("secret"))
    c = connect(bt.url())
    relay = c.create_sender(None, name="fire-and-forget", options=AtMostOnce())
    relay.send(Message(address="queue://secret", body="refused"))
    relay.send(Message(address="queue://open", body="delivered"))
    r = c.create_receiver("queue://open", credit=1)
    assert r.receive(timeout=5).body == "delivered"
    assert relay.link.remote_condition is None
    assert bt.queue_size("secret") == 0


def test_relay_message_without_to_is_rejected(connect: Any) -> None:
    from proton.utils import SendException

    c = connect()
    with pytest.raises(SendException):
        c.create_sender(None).send(Message(body="nowhere"))


def test_dynamic_node_properties_are_accepted(connect: Any) -> None:
    c = connect()
    r = c.create_receiver(None, dynamic=True, credit=1,
                          options=DynamicNodeProperties({"x-opt-lifetime": "delete-on-close"}))
    assert r.link.remote_source.address.startswith("temp-queue://")


def test_no_local_filter(connect: Any) -> None:
    from proton import Described

    c = connect()
    other = connect()

    class NoLocal(LinkOption):
        def apply(self, link: Any) -> None:
            link.source.filter.put_dict({symbol("no-local"): Described(
                symbol("apache.org:no-local-filter:list"), [])})

    r = c.create_receiver("topic://nl", credit=5, options=NoLocal())
    c.create_sender("topic://nl").send(Message(body="mine"))
    theirs = other.create_sender("topic://nl")
    theirs.send(Message(body="theirs"))
    assert r.receive(timeout=5).body == "theirs"
    # a barrier, not a pause: whatever the topic sent before the marker has arrived
    theirs.send(Message(body="marker"))
    assert r.receive(timeout=5).body == "marker"
    assert r.fetcher.has_message == 0
