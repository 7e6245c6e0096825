"""PNG charts for the jobs (matplotlib, no display needed)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path


def stacked_bars(path: Path, title: str, xs: list[str], series: dict[str, dict[str, float]],
                 ylabel: str) -> Path:
    """A stacked bar chart: one bar per x, one colour per series name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(xs) + 3), 4.5))
    bottoms: dict[str, float] = defaultdict(float)
    for name, values in sorted(series.items()):
        heights = [values.get(x, 0.0) for x in xs]
        ax.bar(range(len(xs)), heights, bottom=[bottoms[x] for x in xs], label=name)
        for x, h in zip(xs, heights, strict=True):
            bottoms[x] += h
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels(xs, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if series:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
    return path
