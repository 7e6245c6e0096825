"""Bridges between RelayMQ brokers on real loopback sockets, over AMQP and STOMP."""

from __future__ import annotations

import asyncio
import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bridge_helpers import RELAYMQ, Drain, free_port, produce, until, wait_port
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.testing import running_broker
from relaymq_bridge import BridgeState
from relaymq_bridge.manager import manager_of

QOS = ["AT_MOST_ONCE", "DUPLICATES_OK", "ONCE_AND_ONLY_ONCE"]


def url(broker: Broker, scheme: str) -> str:
    return f"{scheme}://{broker.connector_address(scheme)}"


async def host_with(bridges: str, *uris: str) -> Broker:
    """A broker whose configuration holds `bridges` (a <bridges> element)."""
    connectors = "".join(f'<transportConnector uri="{u}"/>' for u in uris)
    config = load_config_text(f"""<broker persistent="false" brokerName="host">
  <transportConnectors>{connectors}</transportConnectors>
  {bridges}
</broker>""", "xml")
    broker = Broker(config, strict=True)
    await broker.start()
    return broker


async def host_serves_clients(host: Broker) -> None:
    """The broker hosting a failed bridge still takes and delivers its clients' messages."""
    await produce(url(host, "amqp"), "queue://host.own", 3)
    drain = await Drain().start(url(host, "amqp"), "queue://host.own")
    try:
        await until(lambda: sorted(drain.bodies) == ["m-0", "m-1", "m-2"],
                    what="the hosting broker to deliver its own messages")
    finally:
        await drain.close()


@pytest.mark.parametrize("qos", QOS)
@pytest.mark.parametrize("scheme", ["amqp", "stomp"])
async def test_bridge_between_relaymq_brokers(scheme: str, qos: str) -> None:
    async with running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as source, \
            running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as target:
        host = await host_with(f"""<bridges>
  <bridge name="b1" source-uri="{url(source, scheme)}" source-destination="queue://src"
          target-uri="{url(target, scheme)}" target-destination="queue://dst"
          quality-of-service="{qos}" max-batch-size="50" max-batch-time="100"
          failure-retry-interval="100" add-message-id-in-header="true"/>
</bridges>""")
        drain = Drain()
        try:
            await produce(url(source, "amqp"), "queue://src", 230, region="eu")
            await drain.start(url(target, "amqp"), "queue://dst")
            await until(lambda: len(drain.deliveries) == 230, what="230 bridged messages")
            assert sorted(drain.bodies) == sorted(f"m-{i}" for i in range(230))
            m = drain.deliveries[0].message
            assert str(m.properties["region"]) == "eu" and m.durable
            assert str(m.properties["ACTIVEMQ_BRIDGE_MSG_ID_LIST"]).startswith("ID:")
            assert ("_AMQ_DUPL_ID" in m.properties) == (qos == "ONCE_AND_ONLY_ONCE")
            await until(lambda: source.queue_size("src") == 0, what="the source acknowledged")
            bridge = manager_of(host).get("b1")
            await until(lambda: bridge.forwarded == 230, what="the last settlements")
            (info,) = manager_of(host).list()
            assert (info["state"], info["forwarded"], info["acknowledged"]) == ("running", 230, 230)
            assert info["batches"] >= 5 and info["quality_of_service"] == qos
            names = [c.name for c in host.outgoing.list()]
            assert names == ["bridge b1 target", "bridge b1 source"]
        finally:
            await drain.close()
            await host.stop()


async def test_selector_and_partial_batches_by_time() -> None:
    async with running_broker(None, "amqp://127.0.0.1:0") as broker:
        host = await host_with(f"""<bridges>
  <bridge name="eu" source-uri="{url(broker, 'amqp')}" source-destination="queue://mixed"
          target-uri="{url(broker, 'amqp')}" target-destination="queue://eu"
          selector="region = 'eu'" max-batch-size="1000" max-batch-time="50"/>
</bridges>""")
        try:
            await produce(url(broker, "amqp"), "queue://mixed", 10, region="eu")
            await produce(url(broker, "amqp"), "queue://mixed", 5, start=10, region="us")
            await until(lambda: broker.queue_size("eu") == 10, what="the eu messages")
            await until(lambda: broker.queue_size("mixed") == 5, what="only the us ones left")
        finally:
            await host.stop()


async def test_durable_topic_source_misses_nothing_while_the_bridge_is_down() -> None:
    async with running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as broker:
        bridge_xml = f"""<bridges>
  <bridge name="prices" source-uri="{url(broker, 'stomp')}" source-destination="topic://prices"
          target-uri="{url(broker, 'amqp')}" target-destination="queue://prices.copy"
          subscription-name="bridge-sub" client-id="bridge-1"/>
</bridges>"""
        host = await host_with(bridge_xml)
        try:
            bridge = manager_of(host).get("prices")
            await until(lambda: bridge.state is BridgeState.RUNNING, what="the bridge")
            await produce(url(broker, "amqp"), "topic://prices", 3)
            await until(lambda: broker.queue_size("prices.copy") == 3, what="3 while running")
            await bridge.stop()
            await produce(url(broker, "amqp"), "topic://prices", 4, start=3)  # bridge is down
            await bridge.start()
            await until(lambda: broker.queue_size("prices.copy") == 7, what="the 4 sent meanwhile")
        finally:
            await host.stop()


async def test_pause_resume_and_management_view() -> None:
    async with running_broker(None, "amqp://127.0.0.1:0") as broker:
        host = await host_with(f"""<bridges>
  <bridge name="p" source-uri="{url(broker, 'amqp')}" source-destination="queue://a"
          target-uri="{url(broker, 'amqp')}" target-destination="queue://b"/>
</bridges>""")
        try:
            manager = manager_of(host)
            bridge = manager.get("p")
            await until(lambda: bridge.state is BridgeState.RUNNING, what="running")
            manager.pause("p")
            assert manager.list()[0]["state"] == "paused"
            await produce(url(broker, "amqp"), "queue://a", 5)
            await until(lambda: manager.list()[0]["pending"] == 5, what="consumed while paused")
            assert broker.queue_size("b") == 0 and manager.list()[0]["forwarded"] == 0
            manager.resume("p")
            await until(lambda: broker.queue_size("b") == 5, what="forwarding after resume")
            await manager.stop("p")
            assert manager.list()[0]["state"] == "stopped"
            with pytest.raises(KeyError, match="no bridge named 'x'; configured: p"):
                manager.get("x")
        finally:
            await host.stop()


async def test_unreachable_endpoint_is_retried_then_the_bridge_stops_and_says_why() -> None:
    async with running_broker(None, "amqp://127.0.0.1:0") as broker:
        dead = free_port()
        host = await host_with(f"""<bridges>
  <bridge name="nowhere" source-uri="{url(broker, 'amqp')}" source-destination="queue://a"
          target-uri="amqp://127.0.0.1:{dead}" target-destination="queue://b"
          failure-retry-interval="20" max-retries="2"/>
</bridges>""", "amqp://127.0.0.1:0")
        try:
            bridge = manager_of(host).get("nowhere")
            await until(lambda: bridge.state is BridgeState.FAILED, what="the bridge to give up")
            info = bridge.info()
            assert info["failures"] == 3 and info["retries"] == 2
            assert f"127.0.0.1:{dead}" in info["last_error"]
            # the broker hosting the bridge still serves its own clients
            await host_serves_clients(host)
        finally:
            await host.stop()


async def test_wrong_credentials_and_a_refused_target_are_clear_errors() -> None:
    from relaymq.hookspecs import hookimpl

    class Check:
        @hookimpl
        def relaymq_authenticate(self, request: Any) -> Any:
            from relaymq.broker.security import Principal
            from relaymq.errors import SecurityError

            if (request.username, request.password) != ("bob", "pw"):
                raise SecurityError("bad user name or password")
            return Principal("bob")

    secured = Broker(load_config_text("""<broker persistent="false"><transportConnectors>
<transportConnector uri="stomp://127.0.0.1:0"/></transportConnectors></broker>""", "xml"),
                     strict=True)
    secured.plugins.register(Check())
    await secured.start()
    try:
        host = await host_with(f"""<bridges>
  <bridge name="creds" source-uri="{url(secured, 'stomp')}" source-destination="/queue/a"
          source-user="bob" source-password="wrong"
          target-uri="{url(secured, 'stomp')}" target-destination="/queue/b"
          target-user="bob" target-password="pw" failure-retry-interval="10" max-retries="1"/>
</bridges>""", "amqp://127.0.0.1:0")
        try:
            bridge = manager_of(host).get("creds")
            await until(lambda: bridge.state is BridgeState.FAILED, what="the bridge to give up")
            assert "credentials" in (bridge.last_error or "") or "refused" in (bridge.last_error or "")
            await host_serves_clients(host)
        finally:
            await host.stop()
    finally:
        await secured.stop()


BAD_BRIDGES = [
    ("bad-selector", 'selector="region = = \'x\'"', "invalid selector"),
    ("bad-subscription", 'subscription-name="s"', "subscription-name needs client-id"),
    ("bad-qos", 'quality-of-service="SOMETIMES"', "quality"),
    ("bad-number", 'max-batch-size="many"', "max-batch-size"),
]


def bad_bridges_xml() -> str:
    bad = "".join(f"""
  <bridge name="{name}" source-uri="vm://localhost" source-destination="topic://a"
          target-uri="vm://localhost" target-destination="queue://b" {attr}/>"""
                  for name, attr, _ in BAD_BRIDGES)
    return f"""<bridges>{bad}
  <bridge name="good" source-uri="vm://localhost" source-destination="queue://in"
          target-uri="vm://localhost" target-destination="queue://out"/>
</bridges>"""


async def test_a_bad_bridge_fails_alone(caplog: pytest.LogCaptureFixture) -> None:
    """An invalid selector (or any bad bridge attribute) fails that bridge: the broker
    starts, the log and management say which bridge and why, the other bridge runs."""
    caplog.set_level(logging.ERROR, logger="relaymq.bridge")
    host = await host_with(bad_bridges_xml(), "amqp://127.0.0.1:0")
    try:
        views = {b["name"]: b for b in manager_of(host).list()}
        for name, _, reason in BAD_BRIDGES:
            assert views[name]["state"] == "failed", views[name]
            assert reason in views[name]["last_error"], views[name]
            assert any(name in r.getMessage() and reason in r.getMessage() for r in caplog.records)
        connections = {c.name: c for c in host.management.broker_connections()}
        assert connections["bad-selector"].state == "failed"
        assert "invalid selector" in connections["bad-selector"].detail["last_error"]
        # the good one forwards, and the broker serves its own clients
        await produce(url(host, "amqp"), "queue://in", 3)
        await until(lambda: host.queue_size("out") == 3, what="the good bridge forwarding")
        assert manager_of(host).get("good").state is BridgeState.RUNNING
        # starting a bad bridge again by management leaves it failed with its reason
        await manager_of(host).start("bad-selector")
        assert manager_of(host).get("bad-selector").state is BridgeState.FAILED
        await host_serves_clients(host)
    finally:
        await host.stop()


def test_a_bad_bridge_fails_alone_in_a_broker_process(tmp_path: Path) -> None:
    """The same with `relaymq run`: it starts (config check warns), logs the bad bridges."""
    port = free_port()
    cfg = tmp_path / "activemq.xml"
    cfg.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
    brokerName="bad-bridges" persistent="false">
  <transportConnectors><transportConnector name="amqp" uri="amqp://127.0.0.1:{port}"/>
  </transportConnectors>
  {bad_bridges_xml()}
</broker></beans>""")
    check = subprocess.run([RELAYMQ, "config", "check", str(cfg)], capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "bridge bad-selector will not run" in check.stdout + check.stderr
    log_file = tmp_path / "broker.log"
    with open(log_file, "wb") as err:
        proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                                stderr=err)
    try:
        wait_port(port, proc)

        async def forwarded() -> None:
            await produce(f"amqp://127.0.0.1:{port}", "queue://in", 2)
            drain = await Drain().start(f"amqp://127.0.0.1:{port}", "queue://out")
            try:
                await until(lambda: sorted(drain.bodies) == ["m-0", "m-1"],
                            what="the good bridge forwarding in the broker process")
            finally:
                await drain.close()

        asyncio.run(forwarded())
        logged = log_file.read_text()
        for name, _, reason in BAD_BRIDGES:
            assert f"bridge {name} will not run" in logged and reason in logged, logged[-3000:]
        assert proc.poll() is None  # still running
    finally:
        proc.terminate()
        proc.wait(30)


def test_config_check_lists_a_bridges_ignored_attributes(tmp_path: Path) -> None:
    """`relaymq config check` shows what a bridge ignores (with the attribute meant,
    in the bridge's own kebab-case), as `relaymq run` logs it."""
    cfg = tmp_path / "activemq.xml"
    cfg.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
    brokerName="typo" persistent="false">
  <transportConnectors><transportConnector name="amqp" uri="amqp://127.0.0.1:{free_port()}"/>
  </transportConnectors>
  <bridges><bridge name="b" source-uri="vm://localhost" source-destination="queue://in"
      target-uri="vm://localhost" target-destination="queue://out" max-batch-sise="10"/></bridges>
</broker></beans>""")
    check = subprocess.run([RELAYMQ, "config", "check", str(cfg)], capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "attribute 'max-batch-sise' is ignored" in check.stdout, check.stdout + check.stderr
    assert "did you mean max-batch-size?" in check.stdout, check.stdout
    strict = subprocess.run([RELAYMQ, "config", "check", "--strict", str(cfg)], capture_output=True,
                            text=True, timeout=120)
    assert strict.returncode != 0 and "max-batch-sise" in strict.stdout + strict.stderr


async def test_vm_means_this_broker() -> None:
    host = await host_with("""<bridges>
  <bridge name="local" source-uri="vm://localhost" source-destination="queue://in"
          target-uri="vm://localhost" target-destination="queue://out"/>
</bridges>""", "amqp://127.0.0.1:0")
    try:
        await produce(url(host, "amqp"), "queue://in", 3)
        await until(lambda: host.queue_size("out") == 3, what="local forwarding")
    finally:
        await host.stop()


async def test_management_stops_and_starts_a_bridge_by_name() -> None:
    async with running_broker(None, "amqp://127.0.0.1:0") as broker:
        host = await host_with(f"""<bridges>
  <bridge name="m" source-uri="{url(broker, 'amqp')}" source-destination="queue://a"
          target-uri="{url(broker, 'amqp')}" target-destination="queue://b"/>
</bridges>""")
        try:
            def entry() -> Any:
                return next(c for c in host.management.broker_connections() if c.name == "m")

            await until(lambda: entry().state == "running", what="management to see it running")
            assert entry().kind == "bridge" and entry().detail["forwarded"] == 0
            assert entry().detail["quality_of_service"] == "DUPLICATES_OK"
            await host.management.stop_broker_connection("m")
            assert manager_of(host).list()[0]["state"] == "stopped"
            await produce(url(broker, "amqp"), "queue://a", 2)
            await host.management.start_broker_connection("m")
            await until(lambda: broker.queue_size("b") == 2, what="forwarding after a restart")
            assert manager_of(host).list()[0]["state"] == "running"
        finally:
            await host.stop()


async def test_a_target_that_refuses_the_messages_is_retried_then_reported() -> None:
    from relaymq.hookspecs import hookimpl

    class RefuseWrites:
        @hookimpl
        def relaymq_authorize(self, principal: Any, action: str, destination: Any) -> bool | None:
            return False if (action == "write" and destination.name == "secret") else None

    target = Broker(load_config_text("""<broker persistent="false"><transportConnectors>
<transportConnector uri="amqp://127.0.0.1:0"/></transportConnectors></broker>""", "xml"), strict=True)
    target.plugins.register(RefuseWrites())
    await target.start()
    try:
        async with running_broker(None, "amqp://127.0.0.1:0") as source:
            host = await host_with(f"""<bridges>
  <bridge name="refused" source-uri="{url(source, 'amqp')}" source-destination="queue://a"
          target-uri="{url(target, 'amqp')}" target-destination="queue://secret"
          failure-retry-interval="20" max-retries="2"/>
</bridges>""", "amqp://127.0.0.1:0")
            try:
                bridge = manager_of(host).get("refused")
                await produce(url(source, "amqp"), "queue://a", 1)
                await until(lambda: bridge.state is BridgeState.FAILED, what="the bridge to give up")
                assert bridge.info()["failures"] == 3 and bridge.forwarded == 0
                assert "secret" in (bridge.last_error or ""), bridge.last_error
                await until(lambda: source.queue_size("a") == 1, what="the message kept on the source")
                await host_serves_clients(host)
            finally:
                await host.stop()
    finally:
        await target.stop()


@pytest.mark.parametrize("scheme", ["amqp", "stomp"])
async def test_a_missing_target_queue_on_a_broker_that_refuses_creation(scheme: str) -> None:
    """A target broker whose authorization refuses creating destinations (ActiveMQ's
    `admin` permission): a bridge to a queue that does not exist there fails with the
    reason, retries as configured, then stops; the message stays on the source, the
    hosting broker serves its clients, and a bridge to an existing queue forwards."""
    from relaymq.hookspecs import hookimpl

    class NoCreate:
        @hookimpl
        def relaymq_authorize(self, principal: Any, action: str, destination: Any) -> bool | None:
            return False if action == "admin" else None

    target = Broker(load_config_text(f"""<broker persistent="false"><transportConnectors>
<transportConnector uri="{scheme}://127.0.0.1:0"/><transportConnector uri="amqp://127.0.0.1:0"/>
</transportConnectors>
<destinations><queue physicalName="present"/></destinations></broker>""", "xml"), strict=True)
    target.plugins.register(NoCreate())
    await target.start()
    try:
        async with running_broker(None, "amqp://127.0.0.1:0") as source:
            host = await host_with(f"""<bridges>
  <bridge name="missing" source-uri="{url(source, 'amqp')}" source-destination="queue://a"
          target-uri="{url(target, scheme)}" target-destination="queue://absent"
          failure-retry-interval="20" max-retries="2" send-timeout="5000"/>
  <bridge name="present" source-uri="{url(source, 'amqp')}" source-destination="queue://b"
          target-uri="{url(target, scheme)}" target-destination="queue://present"
          failure-retry-interval="20"/>
</bridges>""", "amqp://127.0.0.1:0")
            try:
                bridge = manager_of(host).get("missing")
                await produce(url(source, "amqp"), "queue://a", 1)
                await produce(url(source, "amqp"), "queue://b", 2)
                await until(lambda: bridge.state is BridgeState.FAILED, what="the bridge to give up")
                assert bridge.info()["failures"] == 3 and bridge.forwarded == 0
                assert "absent" in (bridge.last_error or ""), bridge.last_error
                await until(lambda: source.queue_size("a") == 1, what="the message kept on the source")
                await until(lambda: target.queue_size("present") == 2, what="the other bridge")
                assert "absent" not in {q for q in target.region.queues}
                await host_serves_clients(host)
            finally:
                await host.stop()
    finally:
        await target.stop()


@pytest.mark.parametrize("qos", QOS)
async def test_messages_without_an_id_are_all_forwarded(qos: str) -> None:
    """An AMQP client sets no message id unless asked: ten equal `ping`s without
    one are ten messages, under every quality of service."""
    from proton import Message as ProtonMessage
    from proton.utils import BlockingConnection

    async with running_broker(None, "amqp://127.0.0.1:0") as source, \
            running_broker(None, "amqp://127.0.0.1:0") as target:
        host = await host_with(f"""<bridges>
  <bridge name="noid" source-uri="{url(source, 'amqp')}" source-destination="queue://pings"
          target-uri="{url(target, 'amqp')}" target-destination="queue://pings.out"
          quality-of-service="{qos}" max-batch-size="4" max-batch-time="50"/>
</bridges>""")
        try:
            def send() -> None:
                conn = BlockingConnection(source.connector_address("amqp"), timeout=30)
                try:
                    sender = conn.create_sender("queue://pings")
                    for _ in range(10):
                        sender.send(ProtonMessage(body="ping", durable=True))
                finally:
                    conn.close()

            await asyncio.to_thread(send)
            await until(lambda: target.queue_size("pings.out") == 10,
                        what="ten pings on the target")
            await until(lambda: source.queue_size("pings") == 0, what="the source emptied")
            (info,) = manager_of(host).list()
            assert info["skipped"] == 0, info
        finally:
            await host.stop()
