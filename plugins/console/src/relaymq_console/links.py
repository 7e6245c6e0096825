"""What the console shows of a broker connection besides its state: whether it
works, its replication lag and the messages it holds, read from the details its
plugin reports (`management.broker_connections()`).

A bridge reports them at the top of its details (`pending`); an Artemis
`<amqp-connection>` reports them per operation (`operations`: a `<mirror>`'s
`lag_ms`, `snf_depth`). A connection with several operations shows the largest
lag and the sum of what they hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: states in which a broker connection is started and doing its work: the registry's
#: `started`, an outgoing AMQP connection's `open`, a bridge's `running`/`paused`
UP_STATES = frozenset({"started", "open", "connected", "running", "paused"})


@dataclass(frozen=True, slots=True)
class LinkFigures:
    up: bool
    lag_seconds: float | None
    pending: int | float | None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def link_figures(info: Any) -> LinkFigures:
    detail = info.detail if isinstance(info.detail, dict) else {}
    parts = [detail] + [op for op in detail.get("operations") or [] if isinstance(op, dict)]
    lags = [p["lag_ms"] for p in parts if _number(p.get("lag_ms"))]
    held: list[Any] = [p.get("snf_depth", p.get("pending")) for p in parts]
    pending: list[int | float] = [v for v in held if _number(v)]
    # an operation that reports a state of its own (a `<mirror>`: `connected`,
    # `refused by the target` ...) is part of whether the connection works
    ops_up = all(p["state"] in UP_STATES for p in parts[1:] if isinstance(p.get("state"), str))
    return LinkFigures(info.state in UP_STATES and ops_up,
                       max(lags) / 1000.0 if lags else None,
                       sum(pending) if pending else None)
