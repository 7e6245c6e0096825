"""Kill -9 the target broker (a `relaymq run` process on kahaDB) while a bridge
forwards to it, at a random moment; after it comes back every message is there:
exactly once with ONCE_AND_ONLY_ONCE (duplicate detection on the target), at least
once with DUPLICATES_OK, at most once with AT_MOST_ONCE. The same with the source
broker killed, each quality of service."""

from __future__ import annotations

import collections
import os
import random
import signal
from pathlib import Path

import pytest
from bridge_helpers import Drain, broker_xml, free_port, produce, start_relaymq, until
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.testing import running_broker
from relaymq_bridge import BridgeState
from relaymq_bridge.manager import manager_of

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")

COUNT = 1500  # kill after 150..900 forwarded: 2 to 9 batches of 100 in, 600+ still to come


@pytest.mark.slow
@pytest.mark.parametrize("qos", ["ONCE_AND_ONLY_ONCE", "DUPLICATES_OK", "AT_MOST_ONCE"])
@pytest.mark.parametrize("scheme", ["amqp", "stomp"])
async def test_target_killed_mid_stream(tmp_path: Path, qos: str, scheme: str) -> None:
    stomp_port, amqp_port = free_port(), free_port()
    cfg = broker_xml(tmp_path, stomp_port, amqp_port)
    target = start_relaymq(cfg, stomp_port)
    port = amqp_port if scheme == "amqp" else stomp_port
    async with running_broker(None, "amqp://127.0.0.1:0") as source:
        src = f"amqp://{source.connector_address('amqp')}"
        host = Broker(load_config_text(f"""<broker persistent="false"><bridges>
  <bridge name="crash" source-uri="{src}" source-destination="queue://src"
          target-uri="{scheme}://127.0.0.1:{port}" target-destination="queue://dst"
          quality-of-service="{qos}" max-batch-size="100" max-batch-time="50"
          failure-retry-interval="100"/>
</bridges></broker>""", "xml"), strict=True)
        await host.start()
        drain = Drain()
        try:
            bridge = manager_of(host).get("crash")
            await produce(src, "queue://src", COUNT)
            moment = random.randint(COUNT // 10, COUNT * 3 // 5)
            await until(lambda: bridge.forwarded >= moment, what=f"{moment} forwarded")
            os.kill(target.pid, signal.SIGKILL)
            target.wait()
            await until(lambda: bridge.state is BridgeState.RETRYING, what="the bridge to see it")
            target = start_relaymq(cfg, stomp_port)
            await until(lambda: source.queue_size("src") == 0, timeout=60,
                        what="the source drained after the target came back")
            await drain.start(f"amqp://127.0.0.1:{amqp_port}", "queue://dst")
            expected = {f"m-{i}" for i in range(COUNT)}
            if qos == "AT_MOST_ONCE":
                await until(lambda: len(drain.deliveries) >= bridge.forwarded, timeout=30,
                            what="what the target accepted")
            else:
                await until(lambda: set(drain.bodies) >= expected, timeout=60,
                            what="every message on the target")
            counts = collections.Counter(drain.bodies)
            assert set(counts) <= expected
            if qos != "DUPLICATES_OK":
                dups = [b for b, n in counts.items() if n > 1]
                assert dups == [], f"{len(dups)} duplicates (killed after {moment}), e.g. {dups[:5]}"
            info = bridge.info()
            assert info["failures"] >= 1 and info["state"] == "running"
        finally:
            await drain.close()
            await host.stop()
            target.kill()
            target.wait()


@pytest.mark.slow
@pytest.mark.parametrize("qos", ["ONCE_AND_ONLY_ONCE", "DUPLICATES_OK", "AT_MOST_ONCE"])
@pytest.mark.parametrize("scheme", ["amqp", "stomp"])
async def test_source_killed_mid_stream(tmp_path: Path, scheme: str, qos: str) -> None:
    """The source broker (kahaDB) dies with acknowledgements in flight: nothing is
    lost, and with ONCE_AND_ONLY_ONCE what it redelivers after the restart is
    dropped by the target's duplicate detection."""
    stomp_port, amqp_port = free_port(), free_port()
    cfg = broker_xml(tmp_path, stomp_port, amqp_port, name="source")
    source = start_relaymq(cfg, stomp_port)
    src_amqp = f"amqp://127.0.0.1:{amqp_port}"
    port = amqp_port if scheme == "amqp" else stomp_port
    async with running_broker(None, "amqp://127.0.0.1:0") as target:
        host = Broker(load_config_text(f"""<broker persistent="false"><bridges>
  <bridge name="src-crash" source-uri="{scheme}://127.0.0.1:{port}" source-destination="queue://src"
          target-uri="amqp://{target.connector_address('amqp')}" target-destination="queue://dst"
          quality-of-service="{qos}" max-batch-size="100" max-batch-time="50"
          failure-retry-interval="100"/>
</bridges></broker>""", "xml"), strict=True)
        await host.start()
        drain = Drain()
        try:
            bridge = manager_of(host).get("src-crash")
            await produce(src_amqp, "queue://src", COUNT)
            moment = random.randint(COUNT // 10, COUNT * 3 // 5)
            await until(lambda: bridge.forwarded >= moment, what=f"{moment} forwarded")
            os.kill(source.pid, signal.SIGKILL)
            source.wait()
            await until(lambda: bridge.state is BridgeState.RETRYING, what="the bridge to see it")
            source = start_relaymq(cfg, stomp_port)
            await produce(src_amqp, "queue://src", 1, start=COUNT)  # a marker behind the rest
            expected = {f"m-{i}" for i in range(COUNT + 1)}
            await drain.start(f"amqp://{target.connector_address('amqp')}", "queue://dst")
            if qos == "AT_MOST_ONCE":
                # what the source still held went ahead of the marker: once the marker
                # is there, everything that will ever arrive has
                await until(lambda: f"m-{COUNT}" in drain.bodies, timeout=90,
                            what="the marker on the target")
                await until(lambda: target.queue_size("dst") == 0, what="the drain")
                counts = collections.Counter(drain.bodies)
                dups = [b for b, n in counts.items() if n > 1]
                assert dups == [], f"{len(dups)} duplicates (killed after {moment}), e.g. {dups[:5]}"
                assert set(counts) <= expected
                return
            await until(lambda: set(drain.bodies) >= expected, timeout=90,
                        what="every message and the marker on the target")
            if qos == "ONCE_AND_ONLY_ONCE":
                # a repeat would arrive before the marker: the bridge forwards in order
                await until(lambda: target.queue_size("dst") == 0, what="the drain")
                counts = collections.Counter(drain.bodies)
                dups = [b for b, n in counts.items() if n > 1]
                assert dups == [], f"{len(dups)} duplicates (killed after {moment}), e.g. {dups[:5]}"
            assert set(drain.bodies) == expected
            assert bridge.info()["failures"] >= 1
        finally:
            await drain.close()
            await host.stop()
            source.kill()
            source.wait()
