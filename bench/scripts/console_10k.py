"""The console with 10,000 queues: /metrics, the queue list (API and page), and the
broker CPU a dashboard left open costs per message.

    .venv/bin/python bench/scripts/console_10k.py [--queues 10000] [--repeat 15]
        [--messages 20000] [--rounds 3] [--idle-seconds 15] [--store kahadb|memory] [--json]

About two minutes with the defaults on a quiet machine.

Starts `relaymq run` (whatever build the venv has: compiled .so files if `make
compile` ran; RELAYMQ_PURE_PYTHON=1 for the interpreted one) with the console and a
STOMP connector, creates the queues by sending one persistent message to each over
STOMP, then times (median and 90th percentile of --repeat requests, after one
warm-up): `GET /metrics`, `GET /api/v1/queues?sort=-depth` (one page of 100 of the
10,000), `GET /queues?sort=-depth` (the HTML page). Then the dashboard's cost: a
STOMP producer and consumer move --messages messages through one queue while the
broker's CPU time is read from /proc, alternately with no dashboard and with one
open (Debian's chromium through Playwright when present, else the dashboard's own
requests: the page, its script, then `/api/v1/broker` every second as console.js
does); the report gives broker CPU per message for each and the difference in %.
Targets (issue 23): /metrics < 300 ms, queue list < 500 ms, dashboard < 2 %.
"""

from __future__ import annotations

import argparse
import json
import os
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
    """A producer and a consumer moving `messages` messages through one queue."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

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
            producer.send(f"/queue/{queue}", f"x{i}")
        if not got.wait(300):
            raise SystemExit(f"only {count[0]} of {messages} messages arrived in 300 s")
        elapsed = time.monotonic() - t0
        producer.disconnect()
        consumer.disconnect()
        return elapsed


class Dashboard:
    """The dashboard left open: chromium when available, else its requests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stop_event = threading.Event()
        self.loaded = threading.Event()
        self.thread: threading.Thread | None = None
        self.kind = "chromium" if shutil.which("chromium") else "http-poll"

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
        if self.kind == "chromium":
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
                    page.goto(f"{self.url}/")
                    page.wait_for_selector("#broker-facts")
                    self.loaded.set()
                    self.stop_event.wait()
                    browser.close()
                return
        with httpx.Client(base_url=self.url, timeout=30) as c:
            c.get("/")
            c.get("/static/console.js")
            c.get("/static/console.css")
            self.loaded.set()
            while not self.stop_event.wait(1.0):
                c.get("/api/v1/broker")


def cpu_per_message(broker: Broker, messages: int, rounds: int) -> dict[str, Any]:
    flow = Flow(broker)
    flow.run(min(2000, messages), "bench.flow")  # warm-up
    without: list[float] = []
    with_dash: list[float] = []
    rates: list[float] = []
    busy: list[float] = []
    kind = "none"
    for _ in range(rounds):
        for dashboard in (False, True):
            if dashboard:
                with Dashboard(broker.url) as d:
                    c0 = cpu_seconds(broker.proc.pid)
                    elapsed = flow.run(messages, "bench.flow")
                    c1 = cpu_seconds(broker.proc.pid)
                kind = d.kind
                with_dash.append((c1 - c0) / messages * 1e6)
            else:
                c0 = cpu_seconds(broker.proc.pid)
                elapsed = flow.run(messages, "bench.flow")
                c1 = cpu_seconds(broker.proc.pid)
                without.append((c1 - c0) / messages * 1e6)
                rates.append(messages / elapsed)
                busy.append((c1 - c0) / elapsed)
    base, dash = statistics.median(without), statistics.median(with_dash)
    return {"dashboard": kind, "us_per_message_without": [round(v, 1) for v in without],
            "us_per_message_with": [round(v, 1) for v in with_dash],
            "median_without_us": round(base, 1), "median_with_us": round(dash, 1),
            "change_percent": round((dash - base) / base * 100, 2),
            "messages_per_second": round(statistics.median(rates)),
            "broker_core_percent": round(statistics.median(busy) * 100, 1)}


def dashboard_idle_cpu(broker: Broker, seconds: float) -> dict[str, Any]:
    """Broker CPU while idle, without and with the dashboard open (CPU share of a core)."""
    c0 = cpu_seconds(broker.proc.pid)
    time.sleep(seconds)
    idle = (cpu_seconds(broker.proc.pid) - c0) / seconds
    with Dashboard(broker.url) as d:
        c0 = cpu_seconds(broker.proc.pid)
        time.sleep(seconds)
        open_ = (cpu_seconds(broker.proc.pid) - c0) / seconds
    return {"dashboard": d.kind, "idle_core_percent": round(idle * 100, 2),
            "dashboard_core_percent": round(open_ * 100, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queues", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=15)
    ap.add_argument("--store", choices=["kahadb", "memory"], default="kahadb")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="console-10k-"))
    broker = Broker(tmp, args.store)
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
        report["flow"] = cpu_per_message(broker, args.messages, args.rounds)
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
    idle = report["idle"]
    print(f"  idle broker: {idle['idle_core_percent']} % of a core; with the dashboard open "
          f"({idle['dashboard']}): {idle['dashboard_core_percent']} %")
    f = report["flow"]
    print(f"  flow: {f['messages_per_second']} msg/s through one queue, broker at "
          f"{f['broker_core_percent']} % of a core ({report['build']})")
    print(f"  CPU per message: {f['median_without_us']} us without the dashboard, "
          f"{f['median_with_us']} us with it ({f['dashboard']}): {f['change_percent']:+.2f} %"
          f"  (rounds: {f['us_per_message_without']} / {f['us_per_message_with']})")
    cost = idle["dashboard_core_percent"] - idle["idle_core_percent"]
    share = cost / max(f["broker_core_percent"], 1e-9) * 100
    print(f"  the dashboard's own cost, {cost:.2f} % of a core, is {share:.1f} % of the "
          "broker's CPU at that flow rate (and less at a higher rate)")
    print(f"  dashboard: {f['change_percent']:+.2f} % CPU per message measured, "
          f"{share:.1f} % from its idle cost; target < 2 %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
