"""`relaymq bridge run CONFIG`: a bridge process without a broker, between two
RelayMQ brokers; kill -9 of the bridge process loses nothing (DUPLICATES_OK)
and duplicates nothing (ONCE_AND_ONLY_ONCE, duplicate detection on the target)."""

from __future__ import annotations

import asyncio
import collections
import json
import signal
import sys
from pathlib import Path

import pytest
from bridge_helpers import RELAYMQ, Drain, produce, until
from relaymq.testing import running_broker

COUNT = 2000


async def start_bridge(cfg: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        RELAYMQ, "bridge", "run", str(cfg), "--status-every", "0.2",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def status_lines(proc: asyncio.subprocess.Process, lines: list[dict]) -> None:
    assert proc.stdout is not None
    async for raw in proc.stdout:
        try:
            lines.append(json.loads(raw))
        except ValueError:
            pass


@pytest.mark.slow
@pytest.mark.parametrize("qos", ["ONCE_AND_ONLY_ONCE", "DUPLICATES_OK"])
async def test_standalone_bridge_survives_kill_9(tmp_path: Path, qos: str) -> None:
    async with running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as source, \
            running_broker(None, "amqp://127.0.0.1:0") as target:
        cfg = tmp_path / "bridges.xml"
        cfg.write_text(f"""<?xml version="1.0"?>
<bridges>
  <bridge name="migrate" source-uri="stomp://{source.connector_address('stomp')}"
          source-destination="/queue/old" target-uri="amqp://{target.connector_address('amqp')}"
          target-destination="queue://new" quality-of-service="{qos}"
          max-batch-size="100" max-batch-time="50" failure-retry-interval="100"/>
</bridges>""")
        await produce(f"amqp://{source.connector_address('amqp')}", "queue://old", COUNT)
        lines: list[dict] = []
        proc = await start_bridge(cfg)
        reader = asyncio.get_running_loop().create_task(status_lines(proc, lines))
        await until(lambda: target.queue_size("new") >= COUNT // 4, what="forwarding started")
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        reader.cancel()
        proc = await start_bridge(cfg)
        try:
            reader = asyncio.get_running_loop().create_task(status_lines(proc, lines))
            await until(lambda: source.queue_size("old") == 0, timeout=60, what="all forwarded")
            await until(lambda: any(line["state"] == "running" and line["acknowledged"] > 0
                                    for line in lines), what="a status line")
            drain = await Drain().start(f"amqp://{target.connector_address('amqp')}", "queue://new")
            await until(lambda: set(drain.bodies) >= {f"m-{i}" for i in range(COUNT)},
                        what="every message on the target")
            counts = collections.Counter(drain.bodies)
            if qos == "ONCE_AND_ONLY_ONCE":
                assert max(counts.values()) == 1
            await drain.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 30) == 0
            reader.cancel()


def test_standalone_refuses_vm_and_bad_files(tmp_path: Path) -> None:
    import subprocess

    cfg = tmp_path / "b.xml"
    cfg.write_text("""<bridges><bridge name="x" source-uri="vm://localhost" source-destination="queue://a"
      target-uri="amqp://127.0.0.1:1" target-destination="queue://b"/></bridges>""")
    r = subprocess.run([RELAYMQ, "bridge", "run", str(cfg)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "vm://localhost means the local broker" in r.stderr
    cfg.write_text("<bridges/>")
    r = subprocess.run([RELAYMQ, "bridge", "run", str(cfg)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "no <bridge> found" in r.stderr
    yml = tmp_path / "b.yaml"
    yml.write_text("""bridges:
  - bridge: {name: y, source-uri: "vm://localhost", source-destination: "queue://a",
             target-uri: "amqp://127.0.0.1:1", target-destination: "queue://b"}
""")
    r = subprocess.run([RELAYMQ, "bridge", "run", str(yml)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "bridge y: vm://localhost means the local broker" in r.stderr
    assert sys.executable  # the relaymq script lives next to this interpreter
