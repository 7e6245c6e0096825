"""The store's journal figures for /metrics and the dashboard.

A persistence adapter that has them offers `journal_metrics()` (relaymq-kahadb,
relaymq-jdbc), a dict: `store` (its name, the metrics' `store` label), `syncs` and
`sync_seconds` (kahaDB: `fdatasync` calls of the journal writer; JDBC: transaction
commits), `sync_buckets` (their latency histogram as `(upper bound, count)`
pairs, not cumulative, the last bound `inf`), `batches`, `batch_records` and
`batch_buckets` (write batches, the records they carried, and their sizes)."""

from __future__ import annotations

from typing import Any


def journal_of(broker: Any) -> dict[str, Any] | None:
    read = getattr(broker.store, "journal_metrics", None)
    if not callable(read):
        return None
    figures = read()
    return figures if isinstance(figures, dict) else None


def summary(figures: dict[str, Any] | None) -> dict[str, Any]:
    """The dashboard's three figures: syncs, their mean latency (ms) and the mean
    records per write batch; empty strings without a journal."""
    if figures is None:
        return {"journal_syncs": "", "journal_sync_ms": "", "journal_batch": ""}
    syncs, batches = figures["syncs"], figures["batches"]
    return {"journal_syncs": syncs,
            "journal_sync_ms": round(figures["sync_seconds"] / syncs * 1000, 3) if syncs else 0,
            "journal_batch": round(figures["batch_records"] / batches, 1) if batches else 0}


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def histogram_lines(name: str, store: str, buckets: list[tuple[float, int]],
                    total: float) -> list[str]:
    """A Prometheus histogram's samples: cumulative `_bucket`s, `_sum`, `_count`."""
    lines = []
    running = 0
    for bound, count in buckets:
        running += count
        lines.append(f'{name}_bucket{{store="{store}",le="{_le(bound)}"}} {running}')
    lines.append(f'{name}_sum{{store="{store}"}} {total}')
    lines.append(f'{name}_count{{store="{store}"}} {running}')
    return lines
