"""Small statistics helpers (no numpy: the bench must not pull heavy deps into workers)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile_sorted(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values (q in 0..100)."""
    if not values:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(values)))
    return values[min(rank, len(values)) - 1]


def latency_summary_us(latencies_ns: Sequence[int]) -> dict[str, float | None]:
    """p50/p95/p99/max/mean in microseconds from nanosecond samples."""
    if not latencies_ns:
        return {"p50": None, "p95": None, "p99": None, "max": None, "mean": None, "samples": 0}
    s = sorted(latencies_ns)
    return {
        "p50": percentile_sorted(s, 50) / 1e3,  # type: ignore[operator]
        "p95": percentile_sorted(s, 95) / 1e3,  # type: ignore[operator]
        "p99": percentile_sorted(s, 99) / 1e3,  # type: ignore[operator]
        "max": s[-1] / 1e3,
        "mean": sum(s) / len(s) / 1e3,
        "samples": len(s),
    }


def median(values: Sequence[float]) -> float | None:
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def spread(values: Sequence[float | None]) -> tuple[float | None, float | None, float | None]:
    """(median, min, max) ignoring missing values."""
    v = [x for x in values if x is not None]
    if not v:
        return None, None, None
    return median(v), min(v), max(v)
