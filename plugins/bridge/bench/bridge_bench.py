"""Bridge throughput and CPU per bridged message, RelayMQ -> RelayMQ.

Two `relaymq run` broker processes (memory store, so the brokers' disks do not
set the pace), N persistent 1 KiB messages preloaded on the source; a bridge
runs in this process (as `relaymq bridge run` would) and the clock runs until
it acknowledged the last message. CPU is this process's (the bridge's) user +
system time divided by N. Each of the six runs (AMQP and STOMP, three qualities of
service) prints a line; the last lines compare with issue 20's targets
(DUPLICATES_OK >= 20,000 msg/s, ONCE_AND_ONLY_ONCE >= half of that). About a
minute on a quiet machine with the defaults, three on a loaded one.

    .venv/bin/python plugins/bridge/bench/bridge_bench.py [--count 30000] [--batch 100]
        [--schemes amqp,stomp] [--timeout 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from relaymq.model.destination import Destination
from relaymq.model.message import BodyType, Message
from relaymq.outgoing import OutgoingConnections
from relaymq_bridge.bridge import Bridge
from relaymq_bridge.config import BridgeConfig, QualityOfService

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(tmp: Path, name: str) -> tuple[subprocess.Popen[bytes], int, int]:
    amqp, stomp = free_port(), free_port()
    cfg = tmp / f"{name}.xml"
    cfg.write_text(f"""<broker brokerName="{name}" persistent="false"><transportConnectors>
  <transportConnector uri="amqp://127.0.0.1:{amqp}"/><transportConnector uri="stomp://127.0.0.1:{stomp}"/>
</transportConnectors></broker>""")
    proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    for port in (amqp, stomp):
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker {name} did not start") from None
                time.sleep(0.05)
    return proc, amqp, stomp


async def preload(uri: str, address: str, count: int) -> None:
    reg = OutgoingConnections()
    conn = await reg.connect(uri)
    sender = await (await conn.session()).open_sender(address)
    body = b"x" * 1024
    for start in range(0, count, 2000):
        futs = [sender.send(Message(body, destination=Destination.queue("bench"), durable=True,
                                    body_type=BodyType.BYTES, message_id=f"ID:bench-{i}"))
                for i in range(start, min(start + 2000, count))]
        await asyncio.gather(*futs)
    await conn.close()


async def one(qos: QualityOfService, scheme: str, count: int, batch: int,
              timeout: float) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        src, s_amqp, s_stomp = start_broker(tmp, "source")
        dst, d_amqp, d_stomp = start_broker(tmp, "target")
        try:
            await preload(f"amqp://127.0.0.1:{s_amqp}", "queue://bench", count)
            sport, dport = (s_amqp, d_amqp) if scheme == "amqp" else (s_stomp, d_stomp)
            bridge = Bridge(BridgeConfig(
                name="bench", source_uri=f"{scheme}://127.0.0.1:{sport}",
                source_destination="queue://bench", target_uri=f"{scheme}://127.0.0.1:{dport}",
                target_destination="queue://bench", quality_of_service=qos,
                max_batch_size=batch, max_batch_time=100), OutgoingConnections())
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            await bridge.start()
            deadline = time.monotonic() + timeout
            while bridge.acknowledged < count:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{scheme} {qos.value}: only {bridge.acknowledged} of "
                                     f"{count} bridged in {timeout} s ({bridge.info()})")
                await asyncio.sleep(0.01)
            elapsed = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
            await bridge.stop()
            return count / elapsed, cpu / count * 1e6
        finally:
            for p in (src, dst):
                p.kill()
                p.wait()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=30000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--schemes", default="amqp,stomp")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one run may take")
    args = ap.parse_args()
    from relaymq.compiled import status

    compiled = [p for p, how in status().items() if "compiled" in str(how)]
    print(f"{args.count} messages of 1 KiB, batches of {args.batch}; "
          f"{'compiled: ' + ', '.join(compiled) if compiled else 'interpreted'}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'protocol':8} {'quality of service':20} {'msg/s':>9} {'bridge CPU us/msg':>17}")
    rates: dict[tuple[str, QualityOfService], float] = {}
    for scheme in args.schemes.split(","):
        for qos in QualityOfService:
            rate, cpu = await one(qos, scheme, args.count, args.batch, args.timeout)
            rates[scheme, qos] = rate
            print(f"{scheme:8} {qos.value:20} {rate:9.0f} {cpu:17.1f}", flush=True)
    for scheme in args.schemes.split(","):
        dup = rates[scheme, QualityOfService.DUPLICATES_OK]
        once = rates[scheme, QualityOfService.ONCE_AND_ONLY_ONCE]
        print(f"{scheme}: DUPLICATES_OK {dup:.0f} msg/s "
              f"({'ok' if dup >= 20000 else 'UNDER'} the 20,000 target), ONCE_AND_ONLY_ONCE "
              f"{once:.0f} msg/s ({once / dup * 100:.0f} % of it, "
              f"{'ok' if once >= 10000 else 'UNDER'} the 10,000 target)")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
