"""The selector cache with a selector-aware virtual topic, through vm:// clients."""

from __future__ import annotations

import pytest
from relaymq.broker.security import ConnectRequest
from relaymq.client import Connection, connect_broker
from relaymq.errors import ConfigError
from relaymq.model.destination import Destination
from relaymq.testing.barriers import before_marker

pytest.importorskip("relaymq_virtual_topic")

ORDERS = "topic://VirtualTopic.Orders"
A = "queue://Consumer.A.VirtualTopic.Orders"
B = "queue://Consumer.B.VirtualTopic.Orders"


def cache_of(broker):
    return broker.extensions["selector-cache"]


def enqueued(broker, name: str) -> int:
    return broker.region.queues[Destination.parse(name)].stats.enqueued


async def send_colors(conn: Connection, *colors: str) -> None:
    for color in colors:
        await conn.send(ORDERS, color, properties={"color": color})


async def test_without_the_cache_a_reconnecting_consumer_misses_messages(start, texts):
    broker = await start(None)
    conn = await connect_broker(broker)
    red = await conn.consumer(A, selector="color = 'red'")
    await red.close()
    await send_colors(conn, "red", "blue")
    back = await conn.consumer(A, selector="color = 'red'")
    # selectorAware counts active consumers only: neither color reached queue A
    assert await before_marker(conn, A, back, properties={"color": "red"}) == []


async def test_the_cache_keeps_matching_messages_for_a_reconnecting_consumer(start, texts):
    broker = await start()
    conn = await connect_broker(broker)
    red = await conn.consumer(A, selector="color = 'red'")
    await red.close()
    await send_colors(conn, "red", "blue", "red")
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 2  # blue did not pile up
    back = await conn.consumer(A, selector="color = 'red'")
    assert await texts(back, properties={"color": "red"}) == ["red", "red"]


async def test_every_selector_seen_on_a_queue_counts(start, texts):
    broker = await start()
    conn = await connect_broker(broker)
    for selector in ("color = 'red'", "color = 'green'"):
        await (await conn.consumer(A, selector=selector)).close()
    await send_colors(conn, "red", "blue", "green")
    everything = await conn.consumer(A)
    assert await texts(everything) == ["red", "green"]


async def test_a_consumer_without_a_selector_is_remembered_as_true(start, texts):
    broker = await start()
    conn = await connect_broker(broker)
    await (await conn.consumer(A)).close()
    await send_colors(conn, "red", "blue")
    assert await texts(await conn.consumer(A)) == ["red", "blue"]
    assert [e.text for e in cache_of(broker).cache.entries(A)] == ["TRUE"]


async def test_queues_are_remembered_separately(start, texts):
    broker = await start()
    conn = await connect_broker(broker)
    await (await conn.consumer(A, selector="color = 'red'")).close()
    await (await conn.consumer(B, selector="color = 'blue'")).close()
    await send_colors(conn, "red", "blue")
    assert await texts(await conn.consumer(A)) == ["red"]
    assert await texts(await conn.consumer(B)) == ["blue"]


async def test_active_consumers_still_count_beside_the_cache(start, texts):
    broker = await start()
    conn = await connect_broker(broker)
    await (await conn.consumer(A, selector="color = 'red'")).close()
    blue = await conn.consumer(A, selector="color = 'blue'")
    await send_colors(conn, "red", "blue", "green")
    assert await texts(blue, properties={"color": "blue"}) == ["blue"]
    assert enqueued(broker, A) == 3  # red for the absent consumer, blue and the marker for this one


# -- what does not widen the cache ---------------------------------------------------------------


async def test_browsers_do_not_widen_the_cache(start, texts):
    broker = await start()
    conn = await connect_broker(broker)
    await conn.browse(A, selector="color = 'red'")
    await send_colors(conn, "red")
    assert cache_of(broker).cache.entries(A) == []
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 0


async def test_broker_connection_consumers_do_not_widen_the_cache(start, texts):
    broker = await start()
    network = Connection(await broker.connect(ConnectRequest(transport="amqp"), network=True))
    remote = await network.consumer(A, selector="color = 'red'")
    await remote.close()
    conn = await connect_broker(broker)
    await send_colors(conn, "red")
    assert cache_of(broker).cache.entries(A) == []
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 0


async def test_temporary_queues_and_topic_subscriptions_are_not_tracked(start):
    broker = await start()
    conn = await connect_broker(broker)
    temp = conn.temporary_queue()
    await conn.consumer(temp, selector="a = 1")
    await conn.consumer(ORDERS, selector="a = 1")
    assert len(cache_of(broker).cache) == 0


# -- options ---------------------------------------------------------------------------------------


async def test_single_selector_per_destination(start, texts):
    broker = await start('<plugins><virtualSelectorCacheBrokerPlugin '
                         'singleSelectorPerDestination="true"/></plugins>')
    conn = await connect_broker(broker)
    await (await conn.consumer(A, selector="color = 'red'")).close()
    await (await conn.consumer(A, selector="color = 'green'")).close()  # replaces red
    await send_colors(conn, "red", "green")
    assert await texts(await conn.consumer(A, selector="color <> 'x'"),
                       properties={"color": "y"}) == ["green"]


async def test_single_selector_keeps_true_until_its_consumer_leaves(start, texts):
    broker = await start('<plugins><virtualSelectorCacheBrokerPlugin '
                         'singleSelectorPerDestination="true"/></plugins>')
    conn = await connect_broker(broker)
    everything = await conn.consumer(A)
    red = await conn.consumer(A, selector="color = 'red'")
    assert [e.text for e in cache_of(broker).cache.entries(A)] == ["TRUE", "color = 'red'"]
    await red.close()
    await everything.close()  # ActiveMQ drops TRUE when a selector-less consumer leaves
    assert [e.text for e in cache_of(broker).cache.entries(A)] == ["color = 'red'"]
    await send_colors(conn, "red", "blue")
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 1


@pytest.mark.parametrize(("ignore", "kept"), [("true", 0), ("false", 1)])
async def test_ignore_wildcard_selectors(start, ignore, kept):
    broker = await start('<plugins><virtualSelectorCacheBrokerPlugin '
                         f'ignoreWildcardSelectors="{ignore}"/></plugins>')
    conn = await connect_broker(broker)
    await (await conn.consumer(A, selector="color LIKE 're%'")).close()
    await (await conn.consumer(B, selector="color = 'red%'")).close()  # no LIKE: cached
    await send_colors(conn, "red")
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == kept
    assert [e.text for e in cache_of(broker).cache.entries(B)] == ["color = 'red%'"]


async def test_string_conversion_selectors_match_as_their_consumer_did(start):
    # STOMP headers are strings; a STOMP consumer's selector converts them.
    broker = await start()
    conn = await connect_broker(broker)
    kernel = conn.kernel
    stomp_like = await kernel.subscribe(Destination.parse(A), selector="price > 5",
                                        selector_string_conversion=True,
                                        on_message=lambda d: None)
    kernel.close_consumer(stomp_like)
    await conn.send(ORDERS, "ten", properties={"price": "10"})
    await conn.send(ORDERS, "one", properties={"price": "1"})
    assert broker.queue_size("Consumer.A.VirtualTopic.Orders") == 1
    assert cache_of(broker).cache.entries(A)[0].string_conversion


async def test_two_caches_are_refused(start):
    with pytest.raises(ConfigError, match="configured twice"):
        await start("<plugins><virtualSelectorCacheBrokerPlugin/>"
                    "<virtualSelectorCacheBrokerPlugin/></plugins>")
