"""Mirroring cost and speed (relaymq-mirror), with `relaymq run` processes.

    .venv/bin/python bench/scripts/mirror_bench.py [--messages 20000] [--rate 2000]
        [--seconds 10] [--backlog 100000] [--store kahadb|memory] [--json]

Whatever build the venv has runs (compiled .so files if `make compile` ran;
RELAYMQ_PURE_PYTHON=1 for the interpreted one). Clients are the outgoing AMQP
client (pipelined, proton's engine) in this process. Four measurements:

1. source CPU per message: broker A's CPU (utime+stime from /proc) for
   --messages persistent 1 KiB messages sent to a queue and then consumed
   (with a mirror: consumed once B has applied every send, so the mirror sends
   each send and each acknowledgement in every run; --overlap consumes while
   sending, as before), with a mirror to B, minus the same on a broker without
   a mirror, per message;
2. target CPU per message: B's CPU over the same run, per message (B applies
   the send and the acknowledgement of each). Both brokers' CPU is read once
   the mirror on A reports nothing left to send or settle (`snf_depth` and
   `unsettled` 0 in its status, polled through A's console every 0.2 s), i.e.
   once B has stored every event: a target that lags is counted in full;
3. replication lag at a steady --rate msg/s for --seconds: a consumer on B
   notes when each message arrives; lag = arrival - the producer's send time
   (p50, p99);
4. SnF drain rate: --backlog messages sent to A while B is down (they wait in
   A's store-and-forward cursor), then B starts; the rate at which they arrive
   on B between 10 % and 90 % of the backlog. With --drain-passive B has no
   consumer while it drains (a standby site, as in disaster recovery): the rate
   is the events B accepted (stored) between 10 % and 90 %, as A's mirror counts
   them, and a consumer reads B back afterwards, untimed, to check it holds them.

Targets (issue 18): source <= 10 us/msg, target <= 15 us/msg, lag p99 < 50 ms
at 2,000 msg/s, drain >= 20k events/s (for 1M events).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.outgoing import OutgoingConnections

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))
TICK = os.sysconf("SC_CLK_TCK")
BODY = b"x" * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    def __init__(self, root: Path, name: str, store: str, mirror_to: int | None = None) -> None:
        self.name = name
        self.port = free_port()
        self.http_port = free_port()
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        persistence = (f'<persistenceAdapter><kahaDB directory="{self.dir / "kahadb"}"/></persistenceAdapter>'
                       if store == "kahadb" else
                       "<persistenceAdapter><memoryPersistenceAdapter/></persistenceAdapter>")
        mirror = ""
        console = ""
        if mirror_to is not None:
            console = f'<plugins><console host="127.0.0.1" port="{self.http_port}"/></plugins>'

            mirror = f"""<broker-connections><amqp-connection uri="tcp://127.0.0.1:{mirror_to}"
                name="B" retry-interval="100"><mirror/></amqp-connection></broker-connections>"""
        self.cfg = self.dir / "activemq.xml"
        self.cfg.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core"
  brokerName="{name}" dataDirectory="{self.dir}">{persistence}
  <transportConnectors><transportConnector name="amqp" uri="amqp://127.0.0.1:{self.port}"/>
  </transportConnectors>{mirror}{console}</broker></beans>""")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        console = "<console" in self.cfg.read_text()
        log = open(self.dir / "broker.log", "ab")  # noqa: SIM115
        cmd = [RELAYMQ, "run", "--config", str(self.cfg)]
        profile = os.environ.get(f"MIRROR_BENCH_PROFILE_{self.name.upper()}")
        if profile:  # a cProfile of this broker, written when it stops
            cmd = [sys.executable, "-m", "cProfile", "-o", profile, *cmd]
        spy = os.environ.get(f"MIRROR_BENCH_PYSPY_{self.name.upper()}")
        if spy:  # a py-spy sample (native frames too: compiled modules), folded stacks
            cmd = [shutil.which("py-spy") or "py-spy", "record", "--native", "-r", "250",
                   "-f", "raw", "-o", spy, "--", *cmd]
        self.spy = bool(spy)
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {(self.dir / 'broker.log').read_text()[-2000:]}")
            with socket.socket() as s, socket.socket() as h:
                if s.connect_ex(("127.0.0.1", self.port)) == 0 and (
                        not console or h.connect_ex(("127.0.0.1", self.http_port)) == 0):
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start")

    def cpu(self) -> float:
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            # py-spy writes its samples on SIGINT (and stops the broker)
            self.proc.send_signal(signal.SIGINT if getattr(self, "spy", False) else signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    async def mirror_status(self) -> dict[str, Any]:
        """This broker's (first) mirror status, from its console."""
        import httpx

        url = f"http://127.0.0.1:{self.http_port}/api/v1/broker-connections"
        async with httpx.AsyncClient() as client:
            ops = _mirror_statuses((await client.get(url)).json())
        return ops[0] if ops else {}

    async def mirror_settled(self, timeout: float) -> None:
        """Wait until this broker's mirror has nothing left to send or settle."""
        import httpx

        url = f"http://127.0.0.1:{self.http_port}/api/v1/broker-connections"
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient() as client:
            while True:
                ops = _mirror_statuses((await client.get(url)).json())
                if ops and all(op["snf_depth"] == 0 and op["unsettled"] == 0 for op in ops):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the mirror of {self.name} did not settle: {ops}")
                await asyncio.sleep(0.2)

    @property
    def uri(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"


def _mirror_statuses(tree: Any) -> list[dict[str, Any]]:
    """Every mirror status (a dict with ``snf_depth``) in a management answer."""
    if isinstance(tree, dict):
        if "snf_depth" in tree:
            return [tree]
        return [s for v in tree.values() for s in _mirror_statuses(v)]
    if isinstance(tree, list):
        return [s for v in tree for s in _mirror_statuses(v)]
    return []


def message(i: int, dest: str = "queue://bench") -> Message:
    return Message(BODY, destination=Destination.parse(dest), message_id=f"ID:bench-{i}",
                   durable=True, timestamp=int(time.time() * 1000), properties={"n": i})


async def produce(uri: str, count: int, rate: float = 0.0, start: int = 0) -> None:
    reg = OutgoingConnections()
    conn = await reg.connect(uri)
    try:
        sender = await (await conn.session()).open_sender("queue://bench")
        futures = []
        t0 = time.monotonic()
        for i in range(start, start + count):
            if rate:
                due = t0 + (i - start) / rate
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            futures.append(sender.send(message(i)))
            if len(futures) >= 500:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
    finally:
        await conn.close()


class Consumer:
    def __init__(self) -> None:
        self.arrivals: list[tuple[float, int]] = []  # (arrival s, producer timestamp ms)
        self.conn: Any = None

    async def start(self, uri: str) -> Consumer:
        self.conn = await OutgoingConnections().connect(uri)

        def got(d: Any) -> None:
            self.arrivals.append((time.time(), d.message.timestamp))
            d.accept()

        await (await self.conn.session()).open_receiver("queue://bench", got, credit=1000)
        return self

    async def wait_for(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.arrivals) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.arrivals)} of {n} arrived")
            await asyncio.sleep(0.02)

    async def close(self) -> None:
        await self.conn.close()


_RUNS = iter(range(1, 1000))


async def through(broker: Proc, n: int, others: list[Proc],
                  overlap: bool = False) -> tuple[float, list[float]]:
    """Send n messages to `broker` and consume them there; CPU seconds of each.
    Each run's message ids are new: a target drops a message id it has seen as a
    duplicate (its postAck then finds nothing), which a bench must not measure.

    The messages are all sent (and, with a mirror, applied by the target) before
    they are consumed, so the mirror sends every send and every acknowledgement:
    the same work in every run. With `overlap` the consumer runs while they are
    sent (as before round 6): then a message consumed before the mirror read its
    send is not sent at all (neither it nor its postAck), and how many are
    depends on how far the mirror lags, i.e. on the machine's load."""
    before = [p.cpu() for p in [broker, *others]]
    start = next(_RUNS) * 10**6
    if overlap:
        consumer = await Consumer().start(broker.uri)
        await produce(broker.uri, n, start=start)
    else:
        await produce(broker.uri, n, start=start)
        if others:
            await broker.mirror_settled(600)
        consumer = await Consumer().start(broker.uri)
    await consumer.wait_for(n, 600)
    await consumer.close()
    if others:  # B has applied (stored) every event of the run
        await broker.mirror_settled(600)
    await asyncio.sleep(0.2)
    after = [p.cpu() for p in [broker, *others]]
    return after[0] - before[0], [a - b for a, b in zip(after[1:], before[1:], strict=True)]


async def drain(a: Proc, b: Proc, backlog: int, out: dict[str, Any],
                passive: bool = False) -> None:
    """Measurement 4: `backlog` messages sent to A while B is down, then B starts.
    `passive`: B has no consumer while it drains (a standby site); a consumer
    reads B afterwards, untimed, to check that B holds every event."""
    b.stop()
    t0 = time.monotonic()
    await produce(a.uri, backlog, start=2 * 10**9)
    out["snf_backlog_produce_s"] = round(time.monotonic() - t0, 1)
    consumer = Consumer()
    # what A's mirror counted as accepted before B is back: the drain counts from it
    accepted_before = int((await a.mirror_status()).get("accepted") or 0)
    t0 = time.monotonic()
    b.start()
    cpu0 = (a.cpu(), b.cpu())
    if not passive:
        await consumer.start(b.uri)
    unsettled: list[int] = []
    accepted: list[tuple[float, int]] = []

    async def watch() -> None:  # how full the mirror's window is while it drains
        while True:
            await asyncio.sleep(0.2)
            try:
                st = await a.mirror_status()
            except Exception:  # noqa: BLE001 - a sample missed
                continue
            unsettled.append(int(st.get("unsettled") or 0))
            accepted.append((time.monotonic(), int(st.get("accepted") or 0)))

    watcher = asyncio.ensure_future(watch())
    try:
        if passive:
            await a.mirror_settled(3600 + backlog / 100)
        else:
            await consumer.wait_for(backlog, 3600 + backlog / 100)
    finally:
        watcher.cancel()
    wall = time.monotonic() - t0
    cpu1 = (a.cpu(), b.cpu())
    if len(accepted) > 2:
        # the same rate as the source sees it (events the target accepted), which
        # the bench's own consumer on B does not limit
        base = accepted_before
        lo_s = next((x for x in accepted if x[1] - base >= 0.1 * backlog), None)
        hi_s = next((x for x in accepted if x[1] - base >= 0.9 * backlog), None)
        if lo_s is not None and hi_s is not None and hi_s[0] > lo_s[0]:
            out["snf_drain_accepted_per_s"] = round((hi_s[1] - lo_s[1]) / (hi_s[0] - lo_s[0]))
    if unsettled:
        unsettled.sort()
        out["snf_drain_unsettled_p10_p50_p90"] = (unsettled[len(unsettled) // 10],
                                                  unsettled[len(unsettled) // 2],
                                                  unsettled[len(unsettled) * 9 // 10])
    out["snf_drain_total_s"] = round(wall, 1)
    # each broker's CPU over the drain as a share of one core: well under 100 % on
    # both means they wait on each other (round trips), not on work
    out["snf_drain_cpu_pct_a_b"] = (round((cpu1[0] - cpu0[0]) / wall * 100),
                                    round((cpu1[1] - cpu0[1]) / wall * 100))
    out["snf_drain_b_cpu_us_per_event"] = round((cpu1[1] - cpu0[1]) / backlog * 1e6, 1)
    out["snf_backlog"] = backlog
    if passive:
        out["snf_drain_mode"] = "passive (no consumer on B while it drains)"
        await consumer.start(b.uri)
        await consumer.wait_for(backlog, 3600 + backlog / 100)
        out["snf_drain_read_back_from_b"] = len(consumer.arrivals)
        out["snf_drain_events_per_s"] = out.get("snf_drain_accepted_per_s")
        await consumer.close()
        return
    times = sorted(t for t, _ in consumer.arrivals)
    lo, hi = times[int(len(times) * 0.1)], times[int(len(times) * 0.9)]
    out["snf_drain_events_per_s"] = round(0.8 * len(times) / max(hi - lo, 1e-9))
    await consumer.close()


async def lag(a: Proc, b: Proc, args: argparse.Namespace, out: dict[str, Any]) -> None:
    """Measurement 3: a consumer on B, a steady --rate of sends to A."""
    consumer = await Consumer().start(b.uri)
    total = int(args.rate * args.seconds)
    await produce(a.uri, total, rate=args.rate, start=10**9)
    await consumer.wait_for(total, 120)
    lags = sorted(max(0.0, t * 1000 - ts) for t, ts in consumer.arrivals)
    out["lag_rate_msg_per_s"] = args.rate
    out["lag_p50_ms"] = round(lags[len(lags) // 2], 1)
    out["lag_p90_ms"] = round(lags[int(len(lags) * 0.9)], 1)
    out["lag_p99_ms"] = round(lags[int(len(lags) * 0.99)], 1)
    await consumer.close()


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    out: dict[str, Any] = {"store": args.store, "messages": args.messages,
                           "build": "pure" if os.environ.get("RELAYMQ_PURE_PYTHON") else "as built"}
    procs: list[Proc] = []
    try:
        if args.lag_only:
            b = Proc(root, "b", args.store).start()
            procs.append(b)
            a = Proc(root, "a", args.store, mirror_to=b.port).start()
            procs.append(a)
            await asyncio.sleep(2)
            await through(a, 2000, [b])  # warm-up
            await lag(a, b, args, out)
            return out
        if args.drain_only:
            b = Proc(root, "b", args.store).start()
            procs.append(b)
            a = Proc(root, "a", args.store, mirror_to=b.port).start()
            procs.append(a)
            await drain(a, b, args.backlog, out, args.drain_passive)
            return out
        # 1-2: CPU per message
        plain = Proc(root, "plain", args.store).start()
        procs.append(plain)
        b = Proc(root, "b", args.store).start()
        procs.append(b)
        a = Proc(root, "a", args.store, mirror_to=b.port).start()
        procs.append(a)
        await asyncio.sleep(2)
        n = args.messages
        await through(plain, 2000, [])  # warm-up
        await through(a, 2000, [b])
        base, _ = await through(plain, n, [], args.overlap)
        status0 = await a.mirror_status()
        mirrored, (target_cpu,) = await through(a, n, [b], args.overlap)
        status1 = await a.mirror_status()
        out["cpu_run"] = "consumer while sending" if args.overlap else "send all, then consume"
        out["source_cpu_us_per_msg_without_mirror"] = round(base / n * 1e6, 1)
        out["source_cpu_us_per_msg_with_mirror"] = round(mirrored / n * 1e6, 1)
        out["source_overhead_us_per_msg"] = round((mirrored - base) / n * 1e6, 1)
        out["target_cpu_us_per_msg"] = round(target_cpu / n * 1e6, 1)
        # events the mirror sent in that run, and messages consumed on A before their
        # send went out (neither it nor its postAck sent: none of the target's work)
        for key in ("sent", "dropped_unsent_pairs"):
            if key in status1:
                out[f"mirror_{key}_in_cpu_run"] = status1[key] - status0.get(key, 0)
        sent = out.get("mirror_sent_in_cpu_run")
        if sent:  # per event the target applied (a send or a postAck)
            out["target_cpu_us_per_event"] = round(target_cpu / sent * 1e6, 1)
        plain.stop()
        if args.cpu_only:
            return out
        # 3: lag at a steady rate
        await lag(a, b, args, out)
        # 4: SnF drain
        await drain(a, b, args.backlog, out, args.drain_passive)
    finally:
        for p in procs:
            p.stop()
        shutil.rmtree(root, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--backlog", type=int, default=100000)
    ap.add_argument("--store", choices=["kahadb", "memory"], default="kahadb")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cpu-only", action="store_true", help="measurements 1-2 only")
    ap.add_argument("--overlap", action="store_true",
                    help="measurements 1-2 with the consumer running while sending (how the "
                    "bench measured before round 6; the mirror's work then depends on the load)")
    ap.add_argument("--drain-passive", action="store_true",
                    help="measurement 4 without a consumer on B while it drains (a standby "
                         "site); B is read back afterwards, untimed")
    ap.add_argument("--drain-only", action="store_true", help="measurement 4 only (a 1M backlog: "
                    "--backlog 1000000)")
    ap.add_argument("--lag-only", action="store_true", help="measurement 3 only")
    args = ap.parse_args()
    load0 = loadavg()
    out = asyncio.run(run(args))
    out["load_average_before_after"] = f"{load0} / {loadavg()}"
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:45} {v}")


if __name__ == "__main__":
    main()
