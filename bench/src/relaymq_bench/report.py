"""Turn per-run JSON records into Markdown tables and comparison ratios.

Why median with min–max: a shared 2-core machine makes single runs noisy;
the median of a few interleaved runs is stable, and the range shows how much
to trust it.  Ratios are computed on medians against the first target, so
"broker CPU ×0.62" reads as "uses 62 % of the reference broker's CPU per
message".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .stats import spread

Record = dict[str, Any]


def group_runs(records: Iterable[Record]) -> dict[tuple[str, str], list[Record]]:
    """Group records by (scenario, target), keeping first-seen order."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((r["scenario"], r["target"]), []).append(r)
    return groups


def _get(path: str) -> Callable[[Record], float | None]:
    keys = path.split(".")

    def get(r: Record) -> float | None:
        v: Any = r
        for k in keys:
            if not isinstance(v, dict):
                return None
            v = v.get(k)
        return v if isinstance(v, int | float) and not isinstance(v, bool) else None

    return get


# (column title, record path, formatter) -- formatter gets a float
def _rate(v: float) -> str:
    return f"{v / 1000:.1f}k" if v >= 1000 else f"{v:.0f}"


def _us(v: float) -> str:
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _ms(v: float) -> str:
    return f"{v / 1000:.2f}" if v < 10_000 else f"{v / 1000:.0f}"


def _mb(v: float) -> str:
    return f"{v:.0f}"


METRICS: list[tuple[str, str, Callable[[float], str]]] = [
    ("send msg/s", "send_rate", _rate),
    ("recv msg/s", "recv_rate", _rate),
    ("p50 ms", "latency_us.p50", _ms),
    ("p95 ms", "latency_us.p95", _ms),
    ("p99 ms", "latency_us.p99", _ms),
    ("max ms", "latency_us.max", _ms),
    ("broker CPU µs/msg", "broker_cpu_us_per_msg", _us),
    ("broker peak RSS MB", "broker_rss_peak_mb", _mb),
    ("client send CPU µs/msg", "client_send_cpu_us_per_msg", _us),
    ("client recv CPU µs/msg", "client_recv_cpu_us_per_msg", _us),
]

# metrics where lower is better (for the ratio table's wording)
LOWER_IS_BETTER = {"latency_us.p50", "latency_us.p95", "latency_us.p99", "latency_us.max",
                   "broker_cpu_us_per_msg", "broker_rss_peak_mb",
                   "client_send_cpu_us_per_msg", "client_recv_cpu_us_per_msg"}


def cell(runs: Sequence[Record], path: str, fmt: Callable[[float], str]) -> str:
    med, lo, hi = spread([_get(path)(r) for r in runs])
    if med is None:
        return "–"
    if len(runs) == 1 or lo == hi or lo is None or hi is None:
        return fmt(med)
    return f"{fmt(med)} ({fmt(lo)}–{fmt(hi)})"


def integrity(runs: Sequence[Record]) -> str:
    lost = sum(r.get("lost", 0) for r in runs)
    dup = sum(r.get("duplicates", 0) for r in runs)
    ooo = sum(r.get("out_of_order", 0) for r in runs)
    if not (lost or dup or ooo):
        return "ok"
    return f"lost {lost}, dup {dup}, order {ooo}"


def markdown_table(records: Iterable[Record]) -> str:
    """One row per (scenario, target): median (min–max) of every metric."""
    groups = group_runs(records)
    if not groups:
        return "_no runs_\n"
    header = ["scenario", "target", "runs", *[m[0] for m in METRICS], "integrity"]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] * 3 + ["---:"] * len(METRICS) + ["---"]) + "|"]
    for (scenario, target), runs in groups.items():
        latency_note = "" if runs[0].get("latency_meaningful", True) else " ⁽ᵠ⁾"
        row = [scenario + latency_note, target, str(len(runs))]
        row += [cell(runs, path, fmt) for _, path, fmt in METRICS]
        row.append(integrity(runs))
        lines.append("| " + " | ".join(row) + " |")
    out = "\n".join(lines) + "\n"
    if any(not rs[0].get("latency_meaningful", True) for rs in groups.values()):
        out += ("\n⁽ᵠ⁾ sequential: latency includes the time messages waited in the queue "
                "while the producer was still sending; compare it only with other "
                "sequential runs.\n")
    return out


_SHAPE = ("target", "protocol", "mode", "pattern", "persistent", "size", "producers",
          "consumers", "rate_target")


def per_ack(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Broker CPU per acknowledgement frame, for runs that have an ``ack: auto`` twin.

    A run with consumer acks (STOMP ACK frames, AMQP dispositions) is compared with
    the run of the same shape (target, protocol, persistence, mode, size, clients)
    whose broker settled on send: per ack = (broker µs/msg - auto's broker µs/msg)
    / (ack frames per message). Medians of each group.
    """
    groups = group_runs(records)
    auto: dict[tuple[Any, ...], list[Record]] = {}
    for runs in groups.values():
        r0 = runs[0]
        if r0.get("ack", (r0.get("settings") or {}).get("ack")) == "auto":
            auto[tuple(r0.get(k) for k in _SHAPE)] = runs
    out = []
    for (scenario, target), runs in groups.items():
        r0 = runs[0]
        mode = r0.get("ack", (r0.get("settings") or {}).get("ack"))
        base = auto.get(tuple(r0.get(k) for k in _SHAPE))
        if mode == "auto" or base is None:
            continue
        cpu = spread([_get("broker_cpu_us_per_msg")(r) for r in runs])[0]
        cpu_auto = spread([_get("broker_cpu_us_per_msg")(r) for r in base])[0]
        apm = spread([_get("acks_per_msg")(r) for r in runs])[0]
        out.append({
            "scenario": scenario, "target": target, "ack": mode,
            "receipts": (r0.get("settings") or {}).get("ack_receipt_every", 0),
            "broker_cpu_us_per_msg": cpu, "auto_broker_cpu_us_per_msg": cpu_auto,
            "acks_per_msg": apm,
            "broker_cpu_us_per_ack": ((cpu - cpu_auto) / apm
                                      if cpu is not None and cpu_auto is not None and apm
                                      else None),
        })
    return out


def per_ack_table(records: Iterable[Record]) -> str:
    rows = per_ack(records)
    if not rows:
        return ""
    lines = ["| scenario | target | ack | receipt every | acks/msg | broker µs/msg | "
             "auto µs/msg | broker µs/ack |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    def f(v: float | None) -> str:
        return "–" if v is None else f"{v:.2f}"

    for row in rows:
        lines.append(f"| {row['scenario']} | {row['target']} | {row['ack']} | "
                     f"{row['receipts'] or '–'} | {f(row['acks_per_msg'])} | "
                     f"{f(row['broker_cpu_us_per_msg'])} | "
                     f"{f(row['auto_broker_cpu_us_per_msg'])} | "
                     f"{f(row['broker_cpu_us_per_ack'])} |")
    return ("\n".join(lines) + "\n\nPer ack: (broker µs/msg − the same scenario's with "
            "ack auto) ÷ ack frames per message (medians).\n")


RATIO_METRICS = [("send msg/s", "send_rate"), ("recv msg/s", "recv_rate"),
                 ("p99 ms", "latency_us.p99"), ("broker CPU µs/msg", "broker_cpu_us_per_msg"),
                 ("broker peak RSS", "broker_rss_peak_mb")]


def ratios(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Median of each target divided by the first target's, per scenario."""
    groups = group_runs(records)
    by_scenario: dict[str, list[tuple[str, list[Record]]]] = {}
    for (scenario, target), runs in groups.items():
        by_scenario.setdefault(scenario, []).append((target, runs))
    out = []
    for scenario, entries in by_scenario.items():
        ref_target, ref_runs = entries[0]
        for target, runs in entries[1:]:
            row: dict[str, Any] = {"scenario": scenario, "target": target,
                                   "reference": ref_target}
            for _, path in RATIO_METRICS:
                a = spread([_get(path)(r) for r in runs])[0]
                b = spread([_get(path)(r) for r in ref_runs])[0]
                row[path] = a / b if a is not None and b else None
            out.append(row)
    return out


def ratio_table(records: Iterable[Record]) -> str:
    rows = ratios(records)
    if not rows:
        return ""
    header = ["scenario", "target ÷ reference", *[m[0] for m in RATIO_METRICS]]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---", "---"] + ["---:"] * len(RATIO_METRICS)) + "|"]
    for row in rows:
        cells = [row["scenario"], f"{row['target']} ÷ {row['reference']}"]
        for _, path in RATIO_METRICS:
            v = row[path]
            cells.append("–" if v is None else f"×{v:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return ("\n".join(lines) + "\n\nRates: above ×1 is faster than the reference. "
            "Latency, CPU and RSS: below ×1 is better.\n")


def json_line(record: Record) -> str:
    return json.dumps(record, sort_keys=False, separators=(",", ":"))


def load_jsonl(paths: Iterable[str]) -> list[Record]:
    out = []
    for path in paths:
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if line.startswith("{"):
                    out.append(json.loads(line))
    return out


def run_summary_line(r: Record) -> str:
    """One human line per finished run (stderr progress)."""
    lat = r.get("latency_us") or {}
    parts = [
        f"[{r['target']}] {r['scenario']} run {r['run']}:",
        f"send {_rate(r['send_rate'])}/s recv {_rate(r['recv_rate'])}/s",
    ]
    if lat.get("p50") is not None:
        parts.append(f"p50 {_ms(lat['p50'])} p99 {_ms(lat['p99'])} ms")
    if r.get("broker_cpu_us_per_msg") is not None:
        parts.append(f"broker {_us(r['broker_cpu_us_per_msg'])} µs/msg "
                     f"{_mb(r['broker_rss_peak_mb'] or 0)} MB")
    if r.get("client_send_cpu_us_per_msg") is not None:
        parts.append(f"client {_us(r['client_send_cpu_us_per_msg'])}/"
                     f"{_us(r['client_recv_cpu_us_per_msg'] or 0)} µs/msg")
    parts.append("ok" if r.get("ok") else
                 f"LOST {r.get('lost')} DUP {r.get('duplicates')} ORDER {r.get('out_of_order')}")
    return " ".join(parts)
