"""relaymq.testing.broker_pool: broker processes shared between scenarios come back
clean, or not at all."""

from __future__ import annotations

import pytest
from relaymq.config.model import BrokerConfig, PolicyEntryConfig
from relaymq.testing.blocking_stomp import BlockingStomp
from relaymq.testing.broker_pool import BrokerPool, config_key
from relaymq.testing.broker_proxy import console_missing
from relaymq.testing.transports import with_connector


def test_configs_that_differ_only_in_ports_and_data_directory_share_a_key() -> None:
    base = BrokerConfig(persistent=False)
    free = with_connector(base, "stomp")
    assert config_key(free) == config_key(with_connector(BrokerConfig(persistent=False), "stomp"))
    moved = with_connector(BrokerConfig(persistent=False, data_directory="/elsewhere"), "stomp")
    assert config_key(moved) == config_key(free)
    assert config_key(with_connector(base, "amqp")) != config_key(free)
    policed = BrokerConfig(persistent=False,
                           policy_entries=[PolicyEntryConfig(queue=">", prioritized_messages=True)])
    assert config_key(with_connector(policed, "stomp")) != config_key(free)
    assert config_key(BrokerConfig(persistent=False, scheduler_support=True)) is None


@pytest.mark.slow
def test_a_released_broker_is_reused_clean_and_a_dirty_or_failed_one_is_stopped(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
    if (missing := console_missing()) is not None:
        pytest.skip(missing)
    pool = BrokerPool(close_bound=3.0)
    cfg = with_connector(BrokerConfig(persistent=False), "stomp")
    try:
        first = pool.acquire(cfg, lambda: tmp_path_factory.mktemp("pool"))
        port = int(first.connector_address("stomp").rpartition(":")[2])
        c = BlockingStomp(port, **{"client-id": "pool-test"})
        c.frame("SUBSCRIBE", {"destination": "/topic/T", "id": "1", "ack": "auto",
                              "activemq.subscriptionName": "kept", "receipt": "s"})
        assert c.read()[0] == "RECEIPT"
        c.frame("UNSUBSCRIBE", {"id": "1", "receipt": "u"})  # the durable subscription stays
        assert c.read()[0] == "RECEIPT"
        assert c.send("/topic/T", b"for the durable subscriber")[0] == "RECEIPT"
        assert c.send("/queue/Q", b"left behind")[0] == "RECEIPT"
        c.close()
        assert first.queue_size("Q") == 1
        assert [(s["name"], s["depth"]) for s in first.durable_subscriptions()] == [("kept", 1)]

        pool.release(first, failed=False)
        again = pool.acquire(cfg, lambda: tmp_path_factory.mktemp("pool"))
        assert again is first and pool.stats.reused == 1 and pool.stats.started == 1
        assert again.destination_stats() == {}
        assert again.durable_subscriptions() == [] and again.connections() == []

        open_client = BlockingStomp(port)  # still connected at release: not clean
        pool.release(again, failed=False)
        open_client.close()
        assert pool.stats.discarded == 1 and not first.process.alive()

        second = pool.acquire(cfg, lambda: tmp_path_factory.mktemp("pool"))
        assert second is not first and pool.stats.started == 2
        pool.release(second, failed=True)
        assert pool.stats.failed == 1 and not second.process.alive()
    finally:
        pool.close()
