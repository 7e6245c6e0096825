"""The console with 10,000 queues: /metrics, the queue list (API and page), and the
broker CPU a dashboard left open costs per message.

    .venv/bin/python bench/scripts/console_10k.py [--queues 10000] [--repeat 15]
        [--messages 15000] [--rate 1500] [--rounds 3] [--idle-seconds 15]
        [--store kahadb|memory] [--json]

About four minutes with the defaults on a quiet machine.

Starts `relaymq run` (whatever build the venv has: compiled .so files if `make
compile` ran; RELAYMQ_PURE_PYTHON=1 for the interpreted one) with the console and a
STOMP connector, creates the queues by sending one persistent message to each over
STOMP, then times (median and 90th percentile of --repeat requests, after one
warm-up): `GET /metrics`, `GET /api/v1/queues?sort=-depth` (one page of 100 of the
10,000), `GET /queues?sort=-depth` (the HTML page), `GET /api/v1/broker`.

Then the dashboard's cost, in four variants (`VARIANTS`): nothing open; the
dashboard's own requests without a browser (`http-poll`: the page, its assets, then
`/api/v1/broker` every data-interval ms, as console.js does): what the broker does
for a dashboard; chromium open on about:blank (no request reaches the broker): what
the browser's presence on the machine's cores does to the broker; chromium open on
the dashboard. For each: the broker's CPU while idle, and while a STOMP producer
and consumer move --messages messages through one queue at --rate messages a
second (each round runs every variant once, alternately): broker CPU per message
(every thread's CPU from /proc/PID/task/*/schedstat), the broker's involuntary
context switches per 1000 messages (preempted by another task) and the CPU of the
bench's other processes (Playwright's driver and chromium) as a share of a core.
Targets (issue 23): /metrics < 300 ms, queue list < 500 ms, dashboard < 2 %.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import stomp

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of `pid`, to the nanosecond (schedstat), falling back
    to /proc/PID/stat's clock ticks (10 ms: too coarse for a few seconds of flow)."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:  # a thread that just ended
                continue
        return total / 1e9
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def tree_cpu_seconds(exclude: int) -> float:
    """CPU time of this bench's descendant processes other than `exclude` (the
    broker): Playwright's driver and chromium's processes (clock ticks)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / TICKS
    me, total = os.getpid(), 0.0
    for pid, t in times.items():
        p, seen = pid, 0
        while p > 1 and seen < 64:
            p, seen = parents.get(p, 0), seen + 1
            if p == exclude or pid == exclude:
                break
            if p == me:
                total += t
                break
    return total


def involuntary_switches(pid: int) -> int:
    """The broker's threads' involuntary context switches (preempted by another task)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith("nonvoluntary_ctxt_switches"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            continue
    return total


class Broker:
    def __init__(self, tmp: Path, store: str) -> None:
        self.stomp_port, self.http_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        adapter = (f'<persistenceAdapter><kahaDB directory="{tmp}/kahadb"/></persistenceAdapter>'
                   if store == "kahadb" else "")
        persistent = "true" if store == "kahadb" else "false"
        cfg = tmp / "activemq.xml"
        cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core"
        brokerName="bench" persistent="{persistent}" dataDirectory="{tmp}/data">
  <plugins><console host="127.0.0.1" port="{self.http_port}"/></plugins>
  {adapter}
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
  </transportConnectors>
</broker>""")
        self.log = open(tmp / "broker.log", "w")
        self.proc = subprocess.Popen([RELAYMQ, "run", "-c", str(cfg)], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"the broker exited: {(tmp / 'broker.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/login", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the console did not come up in 60 s")
            time.sleep(0.1)

    def stomp(self, listener: Any = None) -> stomp.Connection12:
        conn = stomp.Connection12([("127.0.0.1", self.stomp_port)])
        if listener is not None:
            conn.set_listener("", listener)
        conn.connect("bench", "bench", wait=True)
        return conn

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class Receipts(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.cond = threading.Condition()

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.seen.add(frame.headers["receipt-id"])
            self.cond.notify_all()

    def wait(self, receipt: str, timeout: float) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: receipt in self.seen, timeout):
                raise SystemExit(f"no receipt {receipt} in {timeout} s")


def create_queues(broker: Broker, count: int) -> float:
    started = time.monotonic()
    rec = Receipts()
    conn = broker.stomp(rec)
    for i in range(count):
        headers = {"persistent": "true"}
        if i % 1000 == 999 or i == count - 1:
            headers["receipt"] = f"q{i}"
        conn.send(f"/queue/bench.q{i:05d}", f"m{i}", headers=headers)
        if "receipt" in headers:
            rec.wait(headers["receipt"], 120)
    conn.disconnect()
    return time.monotonic() - started


def timed(client: httpx.Client, path: str, repeat: int) -> dict[str, Any]:
    r = client.get(path)  # warm-up
    r.raise_for_status()
    size = len(r.content)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = client.get(path)
        times.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
    times.sort()
    return {"path": path, "median_ms": round(statistics.median(times), 1),
            "p90_ms": round(times[int(0.9 * (len(times) - 1))], 1),
            "max_ms": round(times[-1], 1), "bytes": size}


class Flow:
    """A producer and a consumer moving `messages` messages through one queue, at
    `rate` messages a second (0: as fast as the client goes). A fixed rate below
    what the machine sustains in every variant keeps the broker's batching the same
    with and without the browser: at full speed a slower client (the browser takes
    its CPU) means smaller batches and more wake-ups per message in the broker,
    which changes its CPU per message whatever the console does."""

    def __init__(self, broker: Broker, rate: float = 0.0) -> None:
        self.broker = broker
        self.rate = rate

    def run(self, messages: int, queue: str) -> float:
        got = threading.Event()
        count = [0]

        class Consumer(stomp.ConnectionListener):
            def on_message(self, frame: Any) -> None:
                count[0] += 1
                if count[0] >= messages:
                    got.set()

        consumer = self.broker.stomp(Consumer())
        consumer.subscribe(f"/queue/{queue}", id="1", ack="auto")
        producer = self.broker.stomp()
        t0 = time.monotonic()
        for i in range(messages):
            if self.rate and i % 20 == 0:
                delay = t0 + i / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            producer.send(f"/queue/{queue}", f"x{i}")
        if not got.wait(300):
            raise SystemExit(f"only {count[0]} of {messages} messages arrived in 300 s")
        elapsed = time.monotonic() - t0
        producer.disconnect()
        consumer.disconnect()
        return elapsed


#: what is open while the flow runs: nothing; the dashboard's own requests without a
#: browser (the broker's share of the cost); chromium on a blank page (the browser's
#: presence on the two cores, no request to the broker); chromium on the dashboard
VARIANTS = ("none", "http-poll", "chromium-blank", "chromium")


class Dashboard:
    """The dashboard left open: chromium when available, else its requests."""

    def __init__(self, url: str, kind: str | None = None) -> None:
        self.url = url
        self.stop_event = threading.Event()
        self.loaded = threading.Event()
        self.thread: threading.Thread | None = None
        self.kind = kind or ("chromium" if shutil.which("chromium") else "http-poll")
        if self.kind.startswith("chromium") and not shutil.which("chromium"):
            self.kind = "http-poll"

    def __enter__(self) -> Dashboard:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not self.loaded.wait(60):
            raise SystemExit("the dashboard did not load in 60 s")
        time.sleep(1.5)  # past the page load: polling
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(30)

    def _run(self) -> None:
        if self.kind.startswith("chromium"):
            try:
                from playwright.sync_api import sync_playwright
            except ImportError:
                self.kind = "http-poll"
            else:
                with sync_playwright() as p:
                    browser = p.chromium.launch(
                        executable_path=shutil.which("chromium"),
                        args=["--headless=new", "--no-sandbox", "--disable-gpu"])
                    page = browser.new_page()
                    if self.kind == "chromium-blank":
                        page.goto("about:blank")
                    else:
                        page.goto(f"{self.url}/")
                        page.wait_for_selector("#broker-facts")
                    self.loaded.set()
                    self.stop_event.wait()
                    browser.close()
                return
        with httpx.Client(base_url=self.url, timeout=30) as c:
            page = c.get("/").text
            c.get("/static/console.js")
            c.get("/static/console.css")
            # as console.js: every data-interval ms
            found = re.search(r'data-interval="(\d+)"', page)
            interval = int(found.group(1)) / 1000 if found else 1.0
            c.get("/api/v1/broker")
            self.loaded.set()
            while not self.stop_event.wait(interval):
                c.get("/api/v1/broker")


def _one_flow(broker: Broker, flow: Flow, messages: int) -> dict[str, float]:
    pid = broker.proc.pid
    c0, o0, n0 = cpu_seconds(pid), tree_cpu_seconds(pid), involuntary_switches(pid)
    elapsed = flow.run(messages, "bench.flow")
    c1, o1, n1 = cpu_seconds(pid), tree_cpu_seconds(pid), involuntary_switches(pid)
    return {"us": (c1 - c0) / messages * 1e6, "rate": messages / elapsed,
            "busy": (c1 - c0) / elapsed, "others": (o1 - o0) / elapsed,
            "preempted": (n1 - n0) / messages * 1000}


def cpu_per_message(broker: Broker, messages: int, rounds: int,
                    rate: float = 0.0) -> dict[str, Any]:
    """Each round runs the flow once per variant (`VARIANTS`); the report gives, per
    variant, the median broker CPU per message, message rate, the broker's share of
    a core, the CPU of the bench's other processes (the browser) as a share of a
    core, and the broker's involuntary context switches per 1000 messages."""
    flow = Flow(broker, rate)
    flow.run(min(2000, messages), "bench.flow")  # warm-up
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    kinds: dict[str, str] = {}
    for _ in range(rounds):
        for variant in VARIANTS:
            if variant == "none":
                runs[variant].append(_one_flow(broker, flow, messages))
                continue
            with Dashboard(broker.url, variant) as d:
                runs[variant].append(_one_flow(broker, flow, messages))
            kinds[variant] = d.kind
    out: dict[str, Any] = {"kinds": kinds}
    for variant, got in runs.items():
        out[variant] = {
            "us_per_message": [round(g["us"], 2) for g in got],
            "median_us": round(statistics.median(g["us"] for g in got), 2),
            "messages_per_second": round(statistics.median(g["rate"] for g in got)),
            "broker_core_percent": round(statistics.median(g["busy"] for g in got) * 100, 1),
            "others_core_percent": round(statistics.median(g["others"] for g in got) * 100, 1),
            "preempted_per_1000": round(statistics.median(g["preempted"] for g in got), 1)}
    base = out["none"]["median_us"]
    for variant in VARIANTS[1:]:
        out[variant]["change_percent"] = round((out[variant]["median_us"] - base) / base * 100, 2)
    return out


def dashboard_idle_cpu(broker: Broker, seconds: float) -> dict[str, Any]:
    """Broker CPU while idle (share of a core) with each variant open, and the CPU
    of the bench's other processes (the browser)."""
    pid = broker.proc.pid
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        def measure() -> tuple[float, float]:
            c0, o0 = cpu_seconds(pid), tree_cpu_seconds(pid)
            time.sleep(seconds)
            return ((cpu_seconds(pid) - c0) / seconds * 100,
                    (tree_cpu_seconds(pid) - o0) / seconds * 100)

        if variant == "none":
            broker_pct, others = measure()
        else:
            with Dashboard(broker.url, variant):
                broker_pct, others = measure()
        out[variant] = {"broker_core_percent": round(broker_pct, 3),
                        "others_core_percent": round(others, 2)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queues", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--messages", type=int, default=15000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=1500,
                    help="messages per second of the flow (0: as fast as the client goes)")
    ap.add_argument("--idle-seconds", type=float, default=15)
    ap.add_argument("--store", choices=["kahadb", "memory"], default="kahadb")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="console-10k-"))
    broker = Broker(tmp, args.store)
    import relaymq_kahadb  # noqa: F401 - for status(): the packages the broker runs
    import relaymq_stomp  # noqa: F401
    from relaymq.compiled import status

    compiled = [p for p, how in status().items() if "compiled" in str(how)]
    report: dict[str, Any] = {"queues": args.queues, "store": args.store,
                              "build": f"compiled: {', '.join(compiled)}" if compiled
                              else "interpreted", "load_average": os.getloadavg()}
    try:
        report["create_seconds"] = round(create_queues(broker, args.queues), 1)
        with httpx.Client(base_url=broker.url, timeout=60) as c:
            total = c.get("/api/v1/queues", params={"size": 1}).json()["total"]
            if total < args.queues:
                raise SystemExit(f"only {total} queues exist")
            report["metrics"] = timed(c, "/metrics", args.repeat)
            report["queue_list_api"] = timed(c, "/api/v1/queues?sort=-depth", args.repeat)
            report["queue_list_page"] = timed(c, "/queues?sort=-depth", args.repeat)
            report["dashboard_api"] = timed(c, "/api/v1/broker", args.repeat)
        report["idle"] = dashboard_idle_cpu(broker, args.idle_seconds)
        report["flow"] = cpu_per_message(broker, args.messages, args.rounds, args.rate)
        report["rate"] = args.rate
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    report["load_average_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.queues} queues ({args.store}), created in {report['create_seconds']} s; "
          f"load average {report['load_average'][0]:.1f} (2 cores, shared)")
    for key, target in (("metrics", 300), ("queue_list_api", 500), ("queue_list_page", 500),
                        ("dashboard_api", None)):
        m = report[key]
        verdict = "" if target is None else ("  ok" if m["median_ms"] < target
                                             else f"  OVER {target} ms")
        print(f"  GET {m['path']:<32} median {m['median_ms']:7.1f} ms  p90 {m['p90_ms']:7.1f} ms"
              f"  ({m['bytes']} bytes){verdict}")
    idle, f = report["idle"], report["flow"]
    print("  idle, % of a core:   " + "  ".join(
        f"{v}: broker {idle[v]['broker_core_percent']:.2f}, browser {idle[v]['others_core_percent']:.1f}"
        for v in VARIANTS))
    print(f"  flow through one queue ({report['build']}):")
    for v in VARIANTS:
        r = f[v]
        change = f"  {r['change_percent']:+.1f} %" if "change_percent" in r else ""
        print(f"    {v:<15} {r['median_us']:6.2f} us/msg{change:<10} {r['messages_per_second']:>6} msg/s"
              f"  broker {r['broker_core_percent']:5.1f} %  browser {r['others_core_percent']:5.1f} %"
              f"  preempted {r['preempted_per_1000']:6.1f}/1000 msgs  rounds {r['us_per_message']}")
    own = idle["http-poll"]["broker_core_percent"] - idle["none"]["broker_core_percent"]
    share = own / max(f["none"]["broker_core_percent"], 1e-9) * 100
    print(f"  the dashboard's broker-side cost: {own:.3f} % of a core idle = {share:.2f} % of the "
          f"broker's CPU at the flow's rate; per message with its requests and no browser: "
          f"{f['http-poll']['change_percent']:+.1f} % (target < 2 %)")
    print(f"  chromium open on a blank page (no console requests): "
          f"{f['chromium-blank']['change_percent']:+.1f} %; on the dashboard: "
          f"{f['chromium']['change_percent']:+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
