"""Micro-benchmark of RelayMQ's JMS selector engine (``relaymq-bench selectors``).

Selectors run once per (message, candidate consumer) in the dispatch loop, so
their per-evaluation cost bounds the dispatch rate of selector-heavy
deployments. This measures that cost for typical shapes, against a plain
dict and against the kernel's lazy message view (``SelectorView``) that the
broker really passes, and the one-off compile cost for comparison.

Run: ``python -m relaymq_bench.selector_bench [--repeat N] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import timeit
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from relaymq.selector import Selector

#: (case name, selector text). The message below matches every one of them,
#: so the measured path is the full evaluation, not an early exit.
CASES: list[tuple[str, str]] = [
    ("one comparison", "weight > 2500"),
    ("three terms AND/OR", "color = 'blue' AND weight > 2500 OR JMSPriority > 7"),
    ("LIKE", "JMSType LIKE 'car.%'"),
    ("LIKE with _", "JMSType LIKE 'c_r.%n'"),
    ("LIKE, several %", "JMSType LIKE 'c_r.%d%n'"),
    (
        "IN with 10 values",
        "country IN ('AR', 'BR', 'CA', 'DE', 'ES', 'FR', 'GB', 'IT', 'JP', 'US')",
    ),
    ("BETWEEN", "weight BETWEEN 1000 AND 5000"),
    ("IS NULL", "discount IS NULL"),
]

PROPERTIES: dict[str, Any] = {
    "color": "blue",
    "weight": 3000,
    "country": "US",
    "region": "emea",
    "flag": True,
}
HEADERS: dict[str, Any] = {"JMSType": "car.sedan", "JMSPriority": 4}


@dataclass
class Row:
    """One measured case; times are nanoseconds per call."""

    case: str
    selector: str
    dict_ns: float
    view_ns: float | None


def _per_call_ns(func: Callable[[Any], object], arg: object, repeat: int, number: int) -> float:
    """Best-of-``repeat`` nanoseconds per call (the minimum is least disturbed by noise)."""
    timer = timeit.Timer("f(a)", globals={"f": func, "a": arg})
    if number <= 0:
        number, _ = timer.autorange()
        number = max(number, 10_000)
    best = min(timer.repeat(repeat=repeat, number=number))
    return best / number * 1e9


def _message_view() -> Mapping[str, object] | None:
    """The kernel's lazy view of a message, when the kernel model is importable."""
    try:
        from relaymq.model.message import Message, SelectorView
    except ImportError:  # pragma: no cover - bench used against an older kernel
        return None
    message = Message(
        b"",
        type=HEADERS["JMSType"],
        priority=HEADERS["JMSPriority"],
        properties=dict(PROPERTIES),
    )
    return SelectorView(message)  # type: ignore[return-value]


def run(repeat: int, number: int, with_view: bool) -> tuple[list[Row], dict[str, float]]:
    """Measure every case; also the uncached and cached compile cost."""
    fields = {**HEADERS, **PROPERTIES}
    view = _message_view() if with_view else None
    rows = []
    for name, text in CASES:
        selector = Selector.compile(text)
        if selector.matches(fields) is not True:
            raise AssertionError(f"benchmark message does not match {text!r}")
        dict_ns = _per_call_ns(selector.matches, fields, repeat, number)
        view_ns = None
        if view is not None:
            if selector.matches(view) is not True:
                raise AssertionError(f"message view does not match {text!r}")
            view_ns = _per_call_ns(selector.matches, view, repeat, number)
        rows.append(Row(name, text, dict_ns, view_ns))

    three = CASES[1][1]
    compile_us = _per_call_ns(Selector, three, repeat, 200) / 1000
    cached_ns = _per_call_ns(Selector.compile, three, repeat, number)
    return rows, {"compile_uncached_us": compile_us, "compile_cached_ns": cached_ns}


def _table(rows: list[Row], extra: dict[str, float]) -> str:
    width = max(len(r.case) for r in rows)
    sel_width = max(len(r.selector) for r in rows)
    header = (
        f"{'case':<{width}}  {'selector':<{sel_width}}  {'dict ns/eval':>12}  {'view ns/eval':>12}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        view = f"{r.view_ns:12.0f}" if r.view_ns is not None else f"{'n/a':>12}"
        lines.append(f"{r.case:<{width}}  {r.selector:<{sel_width}}  {r.dict_ns:12.0f}  {view}")
    lines.append("")
    lines.append(f"compile (uncached, three terms): {extra['compile_uncached_us']:.1f} us")
    lines.append(f"compile (cache hit):             {extra['compile_cached_ns']:.0f} ns")
    lines.append(f"python {platform.python_version()} ({platform.python_implementation()})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point: print a table (or JSON) of per-evaluation selector costs."""
    parser = argparse.ArgumentParser(
        prog="relaymq-bench selectors",
        description="Measure RelayMQ JMS selector evaluation cost (ns per evaluation).",
    )
    parser.add_argument("--repeat", type=int, default=5, help="timing repeats; best is kept")
    parser.add_argument(
        "--number", type=int, default=0, help="calls per repeat (default: calibrated)"
    )
    parser.add_argument("--no-view", action="store_true", help="skip the message-view column")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    rows, extra = run(args.repeat, args.number, not args.no_view)
    if args.json:
        payload = {"results": [asdict(r) for r in rows], **extra}
        print(json.dumps(payload, indent=2))
    else:
        print(_table(rows, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
