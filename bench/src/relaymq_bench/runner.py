"""Coordinator for one measured run: spawn workers, start them together, collect results.

Sequence (why it is shaped this way):

1. Consumers start first and report ready once attached (AMQP: attached with
   zero credit; STOMP: subscribed in concurrent/topic runs, not yet
   subscribed in sequential queue runs), so no message is dispatched before
   the clock starts and topic subscriptions exist before anything is sent.
2. Producers connect and attach; then the broker's CPU counter is read and
   everyone gets "go" (sequential: producers only).
3. When the producers report, the broker CPU is read again ("sent" mark);
   sequential runs now let the consumers drain.
4. Consumers stop by themselves when they hold every accepted message (one
   consumer, or topic fan-out), or when the coordinator sees the sum of
   their progress reach the total (competing consumers).  A run that stops
   making progress for ``drain_timeout`` seconds is ended and the checker
   reports what is missing.
"""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from . import checker as chk
from .procstat import BrokerMonitor, process_name
from .purge import purge_amqp, purge_stomp
from .scenarios import Scenario
from .stats import latency_summary_us
from .targets import Target, link_config
from .worker import decode_latencies

READY_TIMEOUT = 30.0


class RunError(RuntimeError):
    """A run could not complete (worker error, broker refused, stall)."""


class WorkerProc:
    """A worker subprocess and the threads that turn its stdout into events."""

    def __init__(self, cfg: dict[str, Any], events: queue.Queue[tuple[WorkerProc, dict]]):
        self.role = cfg["role"]
        self.index = cfg["index"]
        self.name = f"{self.role}-{self.index}"
        env = dict(os.environ)
        env.setdefault("PYTHONHASHSEED", "0")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "relaymq_bench.worker", json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        self.stderr: deque[str] = deque(maxlen=40)
        self.result: dict[str, Any] | None = None
        self.ready = False
        self.progress: dict[str, int] = {}
        threading.Thread(target=self._pump_stdout, args=(events,), daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self, events: queue.Queue[tuple[WorkerProc, dict]]) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                self.stderr.append(line.decode(errors="replace").rstrip())
                continue
            events.put((self, ev))
        events.put((self, {"event": "exit"}))

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace").rstrip())

    def send(self, command: str) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(command.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)


class Run:
    """State of one run while it executes."""

    def __init__(self, sc: Scenario, target: Target, log: Callable[[str], None]):
        self.sc = sc
        self.target = target
        self.log = log
        self.events: queue.Queue[tuple[WorkerProc, dict]] = queue.Queue()
        self.workers: list[WorkerProc] = []
        self.last_progress = time.monotonic()

    def spawn(self, cfg: dict[str, Any]) -> WorkerProc:
        w = WorkerProc(cfg, self.events)
        self.workers.append(w)
        return w

    def pump(self, timeout: float) -> None:
        """Handle one event (or time out); raises RunError on worker failure."""
        try:
            w, ev = self.events.get(timeout=timeout)
        except queue.Empty:
            return
        kind = ev.get("event")
        if kind == "ready":
            w.ready = True
        elif kind == "progress":
            ev.pop("event")
            if ev != w.progress:
                self.last_progress = time.monotonic()
            w.progress = ev
        elif kind == "result":
            w.result = ev
            self.last_progress = time.monotonic()
        elif kind == "error":
            detail = ev.get("traceback", "") if os.environ.get("RELAYMQ_BENCH_DEBUG") else ""
            raise RunError(f"{w.name} failed: {ev.get('message')}\n{detail}".rstrip())
        elif kind == "exit" and w.result is None:
            w.proc.wait(5)
            raise RunError(f"{w.name} exited (code {w.proc.returncode}) without a result:\n"
                           + "\n".join(w.stderr))

    def wait(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise RunError(f"timed out after {timeout:.0f}s waiting for {what}")
            self.pump(0.05)

    def close(self) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                w.send("stop")
        deadline = time.monotonic() + 3
        for w in self.workers:
            try:
                w.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.kill()


def run_once(sc: Scenario, target: Target, run_index: int = 0,
             log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Execute one run of ``sc`` against ``target``; returns the JSON-ready record."""
    ep = target.endpoint(sc.protocol)
    run_id = random.getrandbits(32)
    name = sc.destination_name()
    if sc.pattern == "topic" and sc.protocol == "amqp" and target.style == "rabbitmq":
        # RabbitMQ 3.x's AMQP 1.0 plugin never deletes the queue behind a /topic
        # subscription; a fresh routing key per run keeps those leftovers (empty, as
        # every consumer drains before detaching) out of later runs' routing.
        name = f"{name}.{run_id:08x}"
    link = link_config(target.style, sc.protocol, sc.pattern, name, sc.persistent)
    base: dict[str, Any] = {
        "protocol": sc.protocol, "host": ep.host, "port": ep.port, "user": ep.user,
        "password": ep.password, "vhost": ep.vhost, "run_id": run_id, "size": sc.size,
        "persistent": sc.persistent,
    }
    if sc.protocol == "amqp":
        base["link"] = link
    else:
        base["address"] = link["address"]
        base["headers"] = link.get("headers")
    purged = 0
    if sc.purge and sc.pattern == "queue":
        try:
            if sc.protocol == "amqp":
                purged = purge_amqp(ep, link)
            else:
                purged = purge_stomp(ep, link["address"])
        except (OSError, RuntimeError, ValueError) as exc:
            raise RunError(f"cannot use {link['address']} on {ep.url}: "
                           f"{type(exc).__name__}: {exc}") from exc
        if purged:
            log(f"purged {purged} leftover message(s) from {link['address']}")
    pid = target.broker_pid()
    monitor = BrokerMonitor(pid)
    fanout = sc.pattern == "topic"
    sequential = sc.mode == "sequential"
    planned_total = sc.count * sc.producers if sc.count is not None else None
    self_stopping = fanout or sc.consumers == 1
    run = Run(sc, target, log)
    try:
        consumers = [run.spawn({
            **base, "role": "consumer", "index": j, "credit": sc.credit, "ack": sc.ack,
            "ack_receipt_every": sc.ack_receipt_every,
            "count": sc.count, "progress_interval": 0.1,
            "nap": 0.0 if sc.rate else sc.nap_ms / 1e3,
            "expect": planned_total if self_stopping else None,
            "subscribe_early": fanout or not sequential,
        }) for j in range(sc.consumers)]
        run.wait(lambda: all(w.ready for w in consumers), READY_TIMEOUT, "consumers to attach")
        producers = [run.spawn({
            **base, "role": "producer", "index": i, "count": sc.count, "duration": sc.duration,
            "rate": sc.rate / sc.producers if sc.rate else None,
            "max_inflight": sc.max_inflight, "batch": sc.batch,
            "receipt_every": sc.receipt_every,
            "nap": 0.0 if sc.rate else sc.nap_ms / 1e3,
        }) for i in range(sc.producers)]
        run.wait(lambda: all(w.ready for w in producers), READY_TIMEOUT, "producers to attach")

        monitor.start()
        if not sequential:
            for w in consumers:
                w.send("go")
        for w in producers:
            w.send("go")
        run.last_progress = time.monotonic()
        while not all(w.result for w in producers):
            run.pump(0.05)
            if time.monotonic() - run.last_progress > sc.drain_timeout:
                raise RunError(f"producers made no progress for {sc.drain_timeout:g}s "
                               f"(broker stalled or refused credit?)")
        monitor.mark("sent")
        accepted = {w.index: w.result["accepted"] for w in producers}  # type: ignore[index]
        total = sum(accepted.values())
        for w in consumers:
            if sequential:
                w.send("go")
            if self_stopping and total != planned_total:
                w.send(f"expect {total}")
        run.last_progress = time.monotonic()
        stopped = False
        while not all(w.result for w in consumers):
            run.pump(0.05)
            if not stopped and not self_stopping:
                got = sum(w.progress.get("received", 0) for w in consumers)
                if got >= total:
                    for w in consumers:
                        w.send("stop")
                    stopped = True
            if not stopped and time.monotonic() - run.last_progress > sc.drain_timeout:
                log(f"no messages for {sc.drain_timeout:g}s; stopping consumers")
                for w in consumers:
                    w.send("stop")
                stopped = True
        sample = monitor.stop()
    finally:
        run.close()

    prod = [w.result for w in producers]
    cons = [w.result for w in consumers]
    verdict = chk.analyze([c["check"] for c in cons], accepted, fanout)  # type: ignore[index]
    lat: list[int] = []
    for c in cons:
        lat.extend(decode_latencies(c["latency"]))  # type: ignore[index]
    received = sum(c["received"] for c in cons)  # type: ignore[index]
    t_send0 = min(p["t_go"] for p in prod)  # type: ignore[index]
    t_send1 = max(p["t_last"] for p in prod)  # type: ignore[index]
    t_recv0 = t_send0 if not sequential else min(c["t_go"] for c in cons)  # type: ignore[index]
    t_recv1 = max(c["t_last"] or c["t_go"] for c in cons)  # type: ignore[index]
    send_s = max(1e-9, (t_send1 - t_send0) / 1e9)
    recv_s = max(1e-9, (t_recv1 - t_recv0) / 1e9)
    prod_cpu = sum(p["cpu_user"] + p["cpu_sys"] for p in prod)  # type: ignore[index]
    cons_cpu = sum(c["cpu_user"] + c["cpu_sys"] for c in cons)  # type: ignore[index]
    deliveries = verdict.received
    record: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "target": target.label, "style": target.style, "url": ep.url,
        "scenario": sc.label, "run": run_index, "run_id": run_id,
        "protocol": sc.protocol, "mode": sc.mode, "pattern": sc.pattern,
        "persistent": sc.persistent, "size": sc.size, "count": sc.count,
        "duration": sc.duration, "producers": sc.producers, "consumers": sc.consumers,
        "rate_target": sc.rate,
        "settings": {k: getattr(sc, k) for k in ("max_inflight", "batch", "credit",
                                                  "receipt_every", "ack", "ack_receipt_every",
                                                  "nap_ms")},
        "ack": sc.ack,
        # acknowledgement frames (STOMP ACK, AMQP disposition) the consumers sent
        "acks": sum((c.get("io") or {}).get("acks", 0) for c in cons),  # type: ignore[union-attr]
        "acks_per_msg": (sum((c.get("io") or {}).get("acks", 0) for c in cons)  # type: ignore[union-attr]
                         / received if received else None),
        "destination": link["address"], "purged": purged, "sent": sum(p["sent"] for p in prod),  # type: ignore[index]
        "accepted": total, "rejected": sum(p["rejected"] for p in prod),  # type: ignore[index]
        "received": received,
        **{k: v for k, v in verdict.as_dict().items() if k not in ("received",)},
        "send_rate": total / send_s, "recv_rate": deliveries / recv_s,
        "send_seconds": send_s, "recv_seconds": recv_s,
        "latency_us": latency_summary_us(lat),
        "latency_meaningful": not sequential,
        "client_send_cpu_us_per_msg": prod_cpu / total * 1e6 if total else None,
        "client_recv_cpu_us_per_msg": cons_cpu / received * 1e6 if received else None,
        "client_send_cpu_s": prod_cpu, "client_recv_cpu_s": cons_cpu,
        "client_io": {
            "producer_sys_share": _share(prod), "consumer_sys_share": _share(cons),
            "producer": _sum_io(prod), "consumer": _sum_io(cons),
        },
    }
    record.update(_broker_fields(monitor, sample, pid, total, deliveries, sequential))
    return record


def _broker_fields(monitor: BrokerMonitor, sample: Any, pid: int | None, total: int,
                   deliveries: int, sequential: bool) -> dict[str, Any]:
    if pid is None:
        return {"broker_pid": None, "broker_cpu_us_per_msg": None, "broker_rss_peak_mb": None}
    cpu = monitor.cpu_between("start", "end")
    out: dict[str, Any] = {
        "broker_pid": pid, "broker_process": process_name(pid), "broker_alive": sample.alive,
        "broker_cpu_s": cpu,
        # headline: broker CPU per message accepted (queue: one in + one out)
        "broker_cpu_us_per_msg": cpu / total * 1e6 if cpu is not None and total else None,
        # fan-out: CPU per message in + message out
        "broker_cpu_us_per_delivery": (cpu / (total + deliveries) * 1e6
                                       if cpu is not None and total + deliveries else None),
        "broker_rss_peak_mb": sample.rss_peak_kb / 1024 if sample.rss_peak_kb else None,
        "broker_hwm_mb": sample.hwm_kb / 1024 if sample.hwm_kb else None,
    }
    if sequential:
        send_cpu = monitor.cpu_between("start", "sent")
        drain_cpu = monitor.cpu_between("sent", "end")
        out["broker_cpu_send_us_per_msg"] = send_cpu / total * 1e6 if send_cpu is not None and total else None
        out["broker_cpu_drain_us_per_msg"] = (drain_cpu / deliveries * 1e6
                                              if drain_cpu is not None and deliveries else None)
    return out


def _share(results: list[Any]) -> float | None:
    """Fraction of the client CPU spent in the kernel (syscalls, loopback TCP)."""
    user = sum(r["cpu_user"] for r in results)
    sys_ = sum(r["cpu_sys"] for r in results)
    return sys_ / (user + sys_) if user + sys_ else None


def _sum_io(results: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in results:
        for k, v in (r.get("io") or {}).items():
            out[k] = out.get(k, 0) + v
    return out
