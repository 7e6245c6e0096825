"""PNG charts of a comparison, for docs/benchmarking.md and review threads.

Why these four panels: throughput in both directions shows what users feel,
broker CPU per message shows why, and client CPU per message proves the
client was not the bottleneck.  Bars are medians; whiskers span min–max.
matplotlib is imported lazily with the Agg backend so workers and headless
CI never need a display.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .report import Record, _get, group_runs
from .stats import spread

PANELS = [
    ("send rate (k msg/s)", "send_rate", 1e-3),
    ("receive rate (k msg/s)", "recv_rate", 1e-3),
    ("broker CPU (µs/msg)", "broker_cpu_us_per_msg", 1.0),
    ("client CPU send+recv (µs/msg)", "client_cpu_total", 1.0),
]


def _value(r: Record, path: str) -> float | None:
    if path == "client_cpu_total":
        a, b = r.get("client_send_cpu_us_per_msg"), r.get("client_recv_cpu_us_per_msg")
        return a + b if a is not None and b is not None else None
    return _get(path)(r)


def comparison_chart(records: Iterable[Record], path: str, title: str = "") -> str:
    """Grouped bars: scenarios on the x axis, one bar per target; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = group_runs(records)
    scenarios: list[str] = []
    targets: list[str] = []
    for scenario, target in groups:
        if scenario not in scenarios:
            scenarios.append(scenario)
        if target not in targets:
            targets.append(target)
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(max(7.0, 1.3 * len(scenarios) + 3),
                                                      2.6 * len(PANELS) + 1), squeeze=False,
                             sharex=True)
    width = 0.8 / max(1, len(targets))
    for ax, (label, metric, scale) in zip(axes[:, 0], PANELS, strict=True):
        for ti, target in enumerate(targets):
            xs: list[float] = []
            meds: list[float] = []
            errs: list[list[float]] = [[], []]
            for si, scenario in enumerate(scenarios):
                runs = groups.get((scenario, target))
                if not runs:
                    continue
                med, lo, hi = spread([_value(r, metric) for r in runs])
                if med is None or lo is None or hi is None:
                    continue
                xs.append(si - 0.4 + width * (ti + 0.5))
                meds.append(med * scale)
                errs[0].append((med - lo) * scale)
                errs[1].append((hi - med) * scale)
            ax.bar(xs, meds, width * 0.95, yerr=errs, capsize=3, label=target)
        ax.set_ylabel(label, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    bottom = axes[-1, 0]
    bottom.set_xticks(range(len(scenarios)))
    bottom.set_xticklabels([_short(s) for s in scenarios], rotation=20, ha="right", fontsize=8)
    axes[0, 0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(scenario: str) -> str:
    """Drop the parts every standard scenario shares so tick labels stay readable."""
    parts: list[Any] = scenario.split("-")
    keep = [p for p in parts if p not in ("queue", "1024B", "20000")]
    return "-".join(keep) if keep else scenario
