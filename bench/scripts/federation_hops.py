"""What a federated hop costs: broker CPU per message on each side, added p99
latency at a fixed rate, and throughput through a chain of three brokers.

    .venv/bin/python bench/scripts/federation_hops.py [--count 20000] [--rate 2000]
    .venv/bin/python bench/scripts/federation_hops.py --latency [--rates 500,1000,2000] [--repeat 3]

Starts `relaymq run` brokers (memory store, AMQP only) and measures, with
AMQP clients in this process (relaymq's outgoing AMQP client: a few µs per
message), three set-ups on a topic:

* local: producer and consumer on broker A (the baseline);
* one hop: producer on A, consumer on B; B federates the address from A
  (``<local-address-policy>``), so every message crosses one federated hop;
* chain: A -> B -> C, producer on A, consumer on C (two hops).

CPU is each broker process's user+system time (/proc) over the run, divided by
the messages delivered; "per hop" is the federated run's CPU on each broker
minus the baseline broker's (both brokers do one receive and one delivery per
message; the difference is what federation adds). Latency is send-to-receive
time (the timestamp travels in the body) at `--rate` msg/s; throughput is the
chain unthrottled with 1000 messages in flight. Nothing may be lost or
reordered: the run fails otherwise.

``--latency`` compares only end-to-end latency, direct (A to A) against one
federated hop (A to B), interleaved and repeated at each rate, and prints the
median p50/p99 and the p99 the hop adds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from relaymq_amqp.encode import section
from relaymq_amqp.outgoing import AmqpConnection
from relaymq_amqp.scanner import decode, scan

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))
TOPIC = "news.bench"
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    def __init__(self, tmp: Path, name: str) -> None:
        self.name = name
        self.port = free_port()
        self.cfg = tmp / f"{name}.xml"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, upstream: Broker | None) -> None:
        fed = ""
        if upstream is not None:
            fed = (f'<broker-connections><amqp-connection uri="tcp://127.0.0.1:{upstream.port}" '
                   f'name="{self.name}-from-{upstream.name}" retry-interval="200"><federation>'
                   '<local-address-policy name="bench"><include address-match="news.#"/>'
                   '</local-address-policy></federation></amqp-connection></broker-connections>')
        self.cfg.write_text(f"""<broker brokerName="{self.name}" persistent="false" advisorySupport="false">
  <transportConnectors><transportConnector name="amqp" uri="amqp://127.0.0.1:{self.port}"/></transportConnectors>
  {fed}
</broker>""")
        self.proc = subprocess.Popen([RELAYMQ, "run", "--config", str(self.cfg)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker {self.name} did not start") from None
                time.sleep(0.05)

    def cpu(self) -> float:
        """User+system seconds so far."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def message(n: int) -> bytes:
    return section(0x77, f"{n} {time.monotonic_ns()}")


async def run(producer_at: Broker, consumer_at: Broker, count: int, rate: float | None,
              brokers: list[Broker], wait_demand: float) -> dict[str, object]:
    cons = AmqpConnection(f"tcp://127.0.0.1:{consumer_at.port}", reconnect_attempts=0)
    prod = AmqpConnection(f"tcp://127.0.0.1:{producer_at.port}", reconnect_attempts=0)
    await cons.connect()
    await prod.connect()
    latencies: list[float] = []
    expected = 0
    done = asyncio.get_running_loop().create_future()
    problems: list[str] = []
    probe_seen = asyncio.Event()

    def on_message(m: object) -> None:
        nonlocal expected
        data = m.data  # type: ignore[attr-defined]
        value = decode(data, scan(data).body_start)[0].value  # after the hops annotation
        n_text, sent = value.split()
        n = int(n_text)
        if n < 0:
            probe_seen.set()  # the path is up (federation receivers attached)
            return
        if n != expected:
            problems.append(f"expected {expected}, got {n}")
        expected = n + 1
        latencies.append((time.monotonic_ns() - int(sent)) / 1e6)
        if expected == count and not done.done():
            done.set_result(None)

    await cons.open_receiver(f"topic://{TOPIC}", on_message=on_message, credit=1000, auto_accept=True)
    sender = await prod.open_sender(f"topic://{TOPIC}")
    # wait until the federation receivers are attached: probes get through
    deadline = time.monotonic() + wait_demand
    while not probe_seen.is_set():
        if time.monotonic() > deadline:
            raise RuntimeError("the federation did not carry a probe message")
        await sender.send(section(0x77, f"-1 {time.monotonic_ns()}"))
        try:
            await asyncio.wait_for(probe_seen.wait(), 0.5)
        except TimeoutError:
            pass
    await asyncio.sleep(0.5)
    cpu0 = [b.cpu() for b in brokers]
    t0 = time.monotonic()
    inflight = asyncio.Semaphore(1000)

    def settled(_f: object) -> None:
        inflight.release()

    interval = 1.0 / rate if rate else 0.0
    for n in range(count):
        if rate:
            target = t0 + n * interval
            delay = target - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        await inflight.acquire()
        sender.send(message(n)).add_done_callback(settled)
    await asyncio.wait_for(done, 120)
    elapsed = time.monotonic() - t0
    cpu1 = [b.cpu() for b in brokers]
    await prod.close()
    await cons.close()
    if problems:
        raise RuntimeError(f"lost or reordered: {problems[:5]}")
    lat = sorted(latencies)
    return {
        "rate": count / elapsed,
        "p50": statistics.median(lat),
        "p99": lat[int(len(lat) * 0.99) - 1],
        "cpu_us": {b.name: (c1 - c0) / count * 1e6 for b, c0, c1 in zip(brokers, cpu0, cpu1, strict=True)},
    }


def latency(args: argparse.Namespace) -> int:
    """End-to-end latency direct (producer and consumer on A) against one
    federated hop (consumer on B), interleaved, `--repeat` runs per rate; prints
    each run and the median p50/p99 per rate with the p99 the hop adds."""
    tmp = Path(tempfile.mkdtemp(prefix="fedbench"))
    a, b = Broker(tmp, "a"), Broker(tmp, "b")
    rates = [float(r) for r in args.rates.split(",")]
    try:
        a.start(None)
        b.start(a)
        print(f"{'rate':>6s} {'set-up':8s} {'p50 ms':>8s} {'p99 ms':>8s}  (per run, then median)")
        for rate in rates:
            runs: dict[str, list[dict[str, object]]] = {"direct": [], "one hop": []}
            for _ in range(args.repeat):
                for label, cons, watched in (("direct", a, [a]), ("one hop", b, [a, b])):
                    r = asyncio.run(run(a, cons, args.count, rate, watched, 30))
                    runs[label].append(r)
                    print(f"{rate:6.0f} {label:8s} {r['p50']:8.2f} {r['p99']:8.2f}")
            med = {k: (statistics.median(float(r["p50"]) for r in v),  # type: ignore[arg-type]
                       statistics.median(float(r["p99"]) for r in v))  # type: ignore[arg-type]
                   for k, v in runs.items()}
            print(f"{rate:6.0f} median: direct p50 {med['direct'][0]:.2f} p99 {med['direct'][1]:.2f} ms; "
                  f"one hop p50 {med['one hop'][0]:.2f} p99 {med['one hop'][1]:.2f} ms; "
                  f"added p99 {med['one hop'][1] - med['direct'][1]:+.2f} ms")
    finally:
        for br in (b, a):
            br.stop()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--latency", action="store_true",
                    help="only compare end-to-end latency direct vs one hop (see --rates, --repeat)")
    ap.add_argument("--rates", default="500,1000,2000", help="msg/s for --latency, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="runs per set-up and rate for --latency")
    args = ap.parse_args()
    if args.latency:
        return latency(args)
    tmp = Path(tempfile.mkdtemp(prefix="fedbench"))
    a, b, c = Broker(tmp, "a"), Broker(tmp, "b"), Broker(tmp, "c")
    try:
        a.start(None)
        b.start(a)
        c.start(b)
        out = {}
        for label, prod, cons, watched, rate in (
                ("local, paced", a, a, [a], args.rate),
                ("one hop, paced", a, b, [a, b], args.rate),
                ("local, unthrottled", a, a, [a], None),
                ("one hop, unthrottled", a, b, [a, b], None),
                ("chain a->b->c, unthrottled", a, c, [a, b, c], None)):
            out[label] = asyncio.run(run(prod, cons, args.count, rate, watched, 30))
            r = out[label]
            cpu = ", ".join(f"{k} {v:.1f}" for k, v in r["cpu_us"].items())  # type: ignore[attr-defined]
            print(f"{label:28s} {r['rate']:8.0f} msg/s  p50 {r['p50']:6.2f} ms  "
                  f"p99 {r['p99']:6.2f} ms  broker CPU µs/msg: {cpu}")
        base = out["local, unthrottled"]["cpu_us"]["a"]  # type: ignore[index]
        hop = out["one hop, unthrottled"]["cpu_us"]  # type: ignore[index]
        print(f"federated hop, CPU added per message: source side (a) {hop['a'] - base:+.1f} µs, "
              f"receiving side (b) {hop['b'] - base:+.1f} µs")
        added = out["one hop, paced"]["p99"] - out["local, paced"]["p99"]  # type: ignore[operator]
        print(f"added p99 latency at {args.rate:.0f} msg/s: {added:+.2f} ms")
        print(f"throughput through a 3-broker chain: {out['chain a->b->c, unthrottled']['rate']:.0f} msg/s")
    finally:
        for br in (c, b, a):
            br.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
