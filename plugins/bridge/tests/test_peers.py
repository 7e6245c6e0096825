"""Bridges to and from real ActiveMQ 5.17 (STOMP) and RabbitMQ 3.10 (AMQP 1.0 and
STOMP) processes, and a target killed mid-stream."""

from __future__ import annotations

import collections
import logging
from pathlib import Path

import pytest
from bridge_helpers import Drain, produce, until
from peers import Peer
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.spi.outgoing import ConnectOptions
from relaymq.testing import running_broker
from relaymq_bridge import BridgeState
from relaymq_bridge.manager import manager_of

RABBIT = ConnectOptions(user="guest", password="guest")


async def bridge_host(**attrs: str) -> Broker:
    xml_attrs = " ".join(f'{k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    broker = Broker(load_config_text(f"""<broker persistent="false" brokerName="host">
  <bridges><bridge {xml_attrs} failure-retry-interval="200"/></bridges></broker>""", "xml"),
                    strict=True)
    await broker.start()
    return broker


@pytest.mark.parametrize("qos", ["DUPLICATES_OK", "ONCE_AND_ONLY_ONCE"])
async def test_relaymq_to_activemq_and_back_over_stomp(activemq: Peer, qos: str) -> None:
    amq = f"stomp://127.0.0.1:{activemq.stomp_port}"
    async with running_broker(None, "amqp://127.0.0.1:0") as relay:
        local = f"amqp://{relay.connector_address('amqp')}"
        out = await bridge_host(name="to-amq", source_uri=local, source_destination="queue://out",
                                target_uri=amq, target_destination=f"/queue/from.relaymq.{qos}",
                                quality_of_service=qos, max_batch_size="20", max_batch_time="50",
                                add_message_id_in_header="true")
        back = await bridge_host(name="from-amq", source_uri=amq,
                                 source_destination=f"/queue/from.relaymq.{qos}",
                                 target_uri=local, target_destination="queue://back",
                                 quality_of_service=qos, max_batch_size="20", max_batch_time="50")
        drain = Drain()
        try:
            await produce(local, "queue://out", 100, region="eu")
            await drain.start(local, "queue://back")
            await until(lambda: len(drain.deliveries) == 100, what="100 messages back from ActiveMQ")
            assert sorted(drain.bodies) == sorted(f"m-{i}" for i in range(100))
            m = drain.deliveries[0].message
            assert m.properties["region"] == "eu"
            assert str(m.properties["ACTIVEMQ_BRIDGE_MSG_ID_LIST"]).startswith("ID:producer-")
            assert m.durable
            for host in (out, back):
                await until(lambda h=host: manager_of(h).list()[0]["forwarded"] == 100,
                            what="the last settlements counted")
                assert manager_of(host).list()[0]["state"] == "running"
        finally:
            await drain.close()
            await back.stop()
            await out.stop()


@pytest.mark.parametrize("scheme", ["amqp", "stomp"])
async def test_relaymq_to_rabbitmq_and_back(rabbitmq: Peer, scheme: str) -> None:
    port = rabbitmq.amqp_port if scheme == "amqp" else rabbitmq.stomp_port
    rmq = f"{scheme}://guest:guest@127.0.0.1:{port}" + ("?virtualHost=/" if scheme == "stomp" else "")
    queue = f"/queue/bridge.{scheme}"
    async with running_broker(None, "amqp://127.0.0.1:0") as relay:
        local = f"amqp://{relay.connector_address('amqp')}"
        out = await bridge_host(name="to-rmq", source_uri=local, source_destination="queue://out",
                                target_uri=rmq, target_destination=queue,
                                max_batch_size="10", max_batch_time="50")
        back = await bridge_host(name="from-rmq", source_uri=rmq, source_destination=queue,
                                 target_uri=local, target_destination="queue://back",
                                 max_batch_size="10", max_batch_time="50")
        drain = Drain()
        try:
            await produce(local, "queue://out", 50, region="us")
            await drain.start(local, "queue://back")
            await until(lambda: len(drain.deliveries) == 50, what="50 messages back from RabbitMQ")
            assert sorted(drain.bodies) == sorted(f"m-{i}" for i in range(50))
            assert str(drain.deliveries[0].message.properties["region"]) == "us"
        finally:
            await drain.close()
            await back.stop()
            await out.stop()


@pytest.mark.parametrize("scheme", ["amqp", "stomp"])
async def test_a_selector_a_rabbitmq_source_ignores_fails_the_bridge(rabbitmq: Peer,
                                                                    scheme: str) -> None:
    """RabbitMQ applies no selectors: a bridge from it with `selector=` would forward
    every message. The bridge stops (FAILED) with the reason, forwards nothing, and
    the messages stay on RabbitMQ; the same bridge without a selector forwards them."""
    port = rabbitmq.amqp_port if scheme == "amqp" else rabbitmq.stomp_port
    rmq = f"{scheme}://guest:guest@127.0.0.1:{port}" + ("?virtualHost=/" if scheme == "stomp" else "")
    queue = f"/queue/bridge.selector.{scheme}"
    async with running_broker(None, "amqp://127.0.0.1:0") as relay:
        local = f"amqp://{relay.connector_address('amqp')}"
        await produce(rmq, queue, 10, options=RABBIT, region="us")
        host = await bridge_host(name="sel-rmq", source_uri=rmq, source_destination=queue,
                                 target_uri=local, target_destination="queue://selected",
                                 selector="region = 'eu'", max_batch_size="10", max_batch_time="50")
        try:
            bridge = manager_of(host).get("sel-rmq")
            await until(lambda: bridge.state is BridgeState.FAILED, what="the bridge to give up")
            assert "does not apply selectors" in (bridge.last_error or ""), bridge.last_error
            assert bridge.forwarded == 0 and relay.queue_size("selected") == 0
        finally:
            await host.stop()
        plain = await bridge_host(name="all-rmq", source_uri=rmq, source_destination=queue,
                                  target_uri=local, target_destination="queue://selected",
                                  max_batch_size="10", max_batch_time="50")
        try:
            await until(lambda: relay.queue_size("selected") == 10, what="the 10 messages kept on RabbitMQ")
        finally:
            await plain.stop()


async def test_exactly_once_to_rabbitmq_over_amqp_is_refused_with_the_reason(
        rabbitmq: Peer, caplog: pytest.LogCaptureFixture) -> None:
    """RabbitMQ ignores _AMQ_DUPL_ID and the bridge has no AMQP transactions to commit
    a marker with, so ONCE_AND_ONLY_ONCE to it over AMQP would let a batch in doubt
    arrive twice. The bridge stops (FAILED) before it consumes anything, says why in
    its state and once in the log, and is not retried; the messages stay on the
    source. Declared with target-duplicate-detection="true" (the target's consumers
    drop repeats), the same bridge forwards them, each with its _AMQ_DUPL_ID."""
    rmq = f"amqp://guest:guest@127.0.0.1:{rabbitmq.amqp_port}"
    queue = "/queue/bridge.exactly.once"
    async with running_broker(None, "amqp://127.0.0.1:0") as relay:
        local = f"amqp://{relay.connector_address('amqp')}"
        await produce(local, "queue://eo", 10)
        attrs = dict(name="eo-rmq", source_uri=local, source_destination="queue://eo",
                     target_uri=rmq, target_destination=queue,
                     quality_of_service="ONCE_AND_ONLY_ONCE", max_batch_size="10",
                     max_batch_time="50")
        with caplog.at_level(logging.INFO, logger="relaymq.bridge"):
            host = await bridge_host(**attrs)
            try:
                bridge = manager_of(host).get("eo-rmq")
                await until(lambda: bridge.state is BridgeState.FAILED, what="the bridge to refuse")
                why = bridge.last_error or ""
                assert why.startswith("ONCE_AND_ONLY_ONCE cannot be kept: the target (RabbitMQ/3."), why
                assert "does not drop duplicates" in why and "DUPLICATES_OK" in why, why
                info = manager_of(host).list()[0]
                assert (info["forwarded"], info["acknowledged"], info["failures"], info["retries"]) \
                    == (0, 0, 0, 0), info
                assert relay.queue_size("eo") == 10
            finally:
                await host.stop()
        said = [r for r in caplog.records if "eo-rmq" in r.getMessage()]
        assert [(r.levelno, "cannot be kept" in r.getMessage()) for r in said] == \
            [(logging.ERROR, True)], [r.getMessage() for r in said]
        host = await bridge_host(**attrs, target_duplicate_detection="true")
        drain = Drain()
        try:
            await until(lambda: relay.queue_size("eo") == 0, what="the 10 messages forwarded")
            await drain.start(rmq, queue)
            await until(lambda: len(drain.deliveries) >= 10, what="10 messages on RabbitMQ")
            assert sorted(drain.bodies) == sorted(f"m-{i}" for i in range(10))
            ids = {str(d.message.properties["_AMQ_DUPL_ID"]) for d in drain.deliveries}
            assert ids == {f"eo-rmq:ID:producer-{i}" for i in range(10)}
        finally:
            await drain.close()
            await host.stop()


@pytest.mark.slow
async def test_activemq_target_killed_mid_stream_loses_nothing(activemq: Peer) -> None:
    amq = f"stomp://127.0.0.1:{activemq.stomp_port}"
    count = 1000
    async with running_broker(None, "amqp://127.0.0.1:0") as relay:
        local = f"amqp://{relay.connector_address('amqp')}"
        host = await bridge_host(name="crash-amq", source_uri=local, source_destination="queue://c",
                                 target_uri=amq, target_destination="/queue/crash.target",
                                 quality_of_service="DUPLICATES_OK", max_batch_size="50",
                                 max_batch_time="50")
        drain = Drain()
        try:
            bridge = manager_of(host).get("crash-amq")
            await produce(local, "queue://c", count)
            await until(lambda: bridge.forwarded >= 200, what="200 forwarded")
            activemq.stop(kill=True)
            await until(lambda: bridge.state is BridgeState.RETRYING, what="the failure seen")
            activemq.start()
            await until(lambda: relay.queue_size("c") == 0, timeout=90, what="the rest forwarded")
            await drain.start(amq, "/queue/crash.target")
            await until(lambda: set(drain.bodies) >= {f"m-{i}" for i in range(count)},
                        timeout=60, what="every message on ActiveMQ")
            extra = sum(n - 1 for n in collections.Counter(drain.bodies).values())
            assert extra <= 100  # at most the batches in doubt at the kill come twice
        finally:
            await drain.close()
            await host.stop()



@pytest.mark.slow
@pytest.mark.parametrize("kill", ["source", "target"])
async def test_exactly_once_to_activemq_by_transaction_and_marker(activemq: Peer, tmp_path: Path,
                                                                  kill: str) -> None:
    """ActiveMQ has no duplicate detection: ONCE_AND_ONLY_ONCE sends each batch in a
    STOMP transaction with a marker; kill -9 of the source broker or of ActiveMQ
    mid-stream still ends with every message exactly once."""
    import os
    import random
    import signal

    from bridge_helpers import broker_xml, free_port, start_relaymq

    count = 1500
    amq = f"stomp://127.0.0.1:{activemq.stomp_port}"
    queue = f"/queue/exactly.once.{kill}"
    stomp_port, amqp_port = free_port(), free_port()
    cfg = broker_xml(tmp_path, stomp_port, amqp_port, name="source")
    source = start_relaymq(cfg, stomp_port)
    src = f"amqp://127.0.0.1:{amqp_port}"
    host = await bridge_host(name=f"eo-{kill}", source_uri=src, source_destination="queue://s",
                             target_uri=amq, target_destination=queue,
                             quality_of_service="ONCE_AND_ONLY_ONCE", max_batch_size="50",
                             max_batch_time="50")
    drain = Drain()
    try:
        bridge = manager_of(host).get(f"eo-{kill}")
        await produce(src, "queue://s", count)
        moment = random.randint(count // 10, count // 2)  # kill at a random point
        await until(lambda: bridge.forwarded >= moment, what=f"{moment} forwarded")
        assert bridge.info()["exactly_once_by"] == "marker"
        if kill == "source":
            os.kill(source.pid, signal.SIGKILL)
            source.wait()
        else:
            activemq.stop(kill=True)
        await until(lambda: bridge.state is BridgeState.RETRYING, what="the failure seen")
        if kill == "source":
            source = start_relaymq(cfg, stomp_port)
        else:
            activemq.start()
        await produce(src, "queue://s", 1, start=count)  # a marker message behind the rest
        await drain.start(amq, queue)
        await until(lambda: f"m-{count}" in drain.bodies, timeout=90, what="the last message")
        counts = collections.Counter(drain.bodies)
        assert set(counts) == {f"m-{i}" for i in range(count + 1)}
        dups = [b for b, n in counts.items() if n > 1]
        assert dups == [], f"{len(dups)} duplicates (skipped {bridge.skipped}), e.g. {dups[:5]}"
    finally:
        await drain.close()
        await host.stop()
        source.kill()
        source.wait()


async def test_a_first_delivery_with_an_id_sent_before_is_not_skipped(activemq: Peer) -> None:
    """ONCE_AND_ONLY_ONCE to ActiveMQ keeps a marker of the ids it committed; after
    the bridge restarts, new messages reusing those ids (business ids are reused,
    each send with its own timestamp, as a JMS producer stamps it) go."""
    amq = f"stomp://127.0.0.1:{activemq.stomp_port}"
    dest = "/queue/reused.ids"
    async with running_broker(None, "amqp://127.0.0.1:0") as relay:
        local = f"amqp://{relay.connector_address('amqp')}"
        attrs = dict(name="reuse", source_uri=local, source_destination="queue://reuse",
                     target_uri=amq, target_destination=dest,
                     quality_of_service="ONCE_AND_ONLY_ONCE", max_batch_size="10",
                     max_batch_time="50")
        for run in range(2):
            host = await bridge_host(**attrs)
            try:
                # ids ID:producer-0..19 both times, sent at different times
                await produce(local, "queue://reuse", 20, timestamp=1_700_000_000_000 + run,
                              run=run)
                await until(lambda h=host: manager_of(h).list()[0]["acknowledged"] == 20,
                            what=f"run {run}: the 20 messages acknowledged on the source")
                info = manager_of(host).list()[0]
                assert (info["forwarded"], info["skipped"]) == (20, 0), info
            finally:
                await host.stop()
        drain = Drain()
        try:
            await drain.start(amq, dest)
            await until(lambda: len(drain.deliveries) >= 40, what="both runs' messages")
            runs = collections.Counter(str(d.message.properties["run"]) for d in drain.deliveries)
            assert runs == {"0": 20, "1": 20}, runs
        finally:
            await drain.close()
