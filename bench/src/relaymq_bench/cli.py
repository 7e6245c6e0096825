"""``relaymq-bench``: command line for runs, suites, comparisons and reports.

Subcommands::

    relaymq-bench run    [target options] [scenario options] [output options]
    relaymq-bench suite  bench/scenarios/standard.yaml [target options] [output options]
    relaymq-bench report results.jsonl [--chart out.png]
    relaymq-bench selectors ...   (selector evaluation micro-benchmark)

Targets come from ``--target SPEC`` (repeatable), ``--compare SPEC SPEC ...``
(interleaved A B A B ... and ratios against the first), or the single-broker
shorthands ``--url`` / ``--amqp-url`` / ``--stomp-url`` / ``--broker-pid``,
which default from ``RELAYMQ_BENCH_*`` environment variables and then to a
local RelayMQ (amqp://127.0.0.1:5672, stomp://127.0.0.1:61613).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TextIO

from .report import (
    json_line,
    load_jsonl,
    markdown_table,
    per_ack_table,
    ratio_table,
    run_summary_line,
)
from .runner import RunError, run_once
from .scenarios import ACK_MODES, Scenario, ScenarioError, load_suite, make_scenario
from .targets import STYLES, Target, TargetError, check_reachable, parse_target, parse_url

ENV = "RELAYMQ_BENCH_"


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(ENV + name) or default


def _add_target_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target (default: local RelayMQ; env RELAYMQ_BENCH_*)")
    g.add_argument("--url", action="append", default=None,
                   help="broker URL, amqp://[user:pass@]host:port or stomp://...; repeatable "
                        "(env RELAYMQ_BENCH_URL)")
    g.add_argument("--amqp-url", default=None,
                   help="AMQP URL (env RELAYMQ_BENCH_AMQP_URL, default amqp://127.0.0.1:5672)")
    g.add_argument("--stomp-url", default=None,
                   help="STOMP URL (env RELAYMQ_BENCH_STOMP_URL, default stomp://127.0.0.1:61613)")
    g.add_argument("--broker-pid", type=int, default=None,
                   help="broker process id for CPU/RSS accounting (env RELAYMQ_BENCH_BROKER_PID)")
    g.add_argument("--broker-pidfile", default=None, help="read the broker pid from this file")
    g.add_argument("--style", choices=STYLES, default=None,
                   help="address syntax of the broker (env RELAYMQ_BENCH_STYLE, default relaymq)")
    g.add_argument("--user", default=None, help="SASL PLAIN / STOMP login (env RELAYMQ_BENCH_USER)")
    g.add_argument("--password", default=None, help="(env RELAYMQ_BENCH_PASSWORD)")
    g.add_argument("--label", default=None, help="name of the target in reports")
    g.add_argument("--target", action="append", default=None, metavar="SPEC",
                   help="label=NAME,url=URL[,url=URL][,pid=N|pidfile=F][,style=S][,user=U,"
                        "password=P]; repeat to compare (env RELAYMQ_BENCH_TARGETS, ';'-separated)")
    g.add_argument("--compare", nargs="+", metavar="SPEC", default=None,
                   help="targets to run interleaved (A B A B ...); ratios are against the first")


def _add_output_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--json", default="-", metavar="FILE",
                   help="append one JSON line per run to FILE ('-' = stdout, the default)")
    g.add_argument("--markdown", default=None, metavar="FILE",
                   help="also write the Markdown summary to FILE")
    g.add_argument("--chart", default=None, metavar="PNG", help="write a comparison chart")
    g.add_argument("--title", default=None, help="title of the Markdown summary and chart")
    g.add_argument("-q", "--quiet", action="store_true", help="no per-run progress on stderr")


def _add_scenario_options(p: argparse.ArgumentParser, suite: bool) -> None:
    g = p.add_argument_group("scenario" + (" overrides" if suite else ""))
    g.add_argument("--protocol", choices=("amqp", "stomp"), default=None,
                   help="run only this protocol" if suite else "default: scheme of the URL")
    g.add_argument("--size", type=int, default=None, help="message body bytes (default 1024)")
    g.add_argument("--count", type=int, default=None, help="messages per producer (default 20000)")
    g.add_argument("--duration", type=float, default=None, help="seconds of sending per producer")
    g.add_argument("--runs", type=int, default=None, help="measured runs (median, min-max)")
    g.add_argument("--warmup", type=int, default=None, help="unreported runs first")
    if suite:
        g.add_argument("--only", default=None, help="run scenarios whose name contains this")
        return
    g.add_argument("--persistent", action=argparse.BooleanOptionalAction, default=False)
    g.add_argument("--mode", choices=("sequential", "concurrent"), default="concurrent")
    g.add_argument("--producers", type=int, default=1)
    g.add_argument("--consumers", type=int, default=1)
    g.add_argument("--pattern", choices=("queue", "topic"), default="queue")
    g.add_argument("--topic", dest="pattern", action="store_const", const="topic",
                   help="shorthand for --pattern topic (fan-out to every consumer)")
    g.add_argument("--rate", type=float, default=None,
                   help="total msg/s over all producers (latency runs)")
    g.add_argument("--destination", default=None, help="queue/topic name (no prefix)")
    g.add_argument("--max-inflight", type=int, default=2000,
                   help="unsettled messages per producer")
    g.add_argument("--batch", type=int, default=256, help="messages per write")
    g.add_argument("--credit", type=int, default=2000, help="AMQP credit / STOMP prefetch")
    g.add_argument("--receipt-every", type=int, default=100,
                   help="STOMP: request a receipt on every Nth SEND (and the last)")
    g.add_argument("--ack", choices=ACK_MODES, default="client",
                   help="auto: broker settles on send (STOMP ack:auto, AMQP pre-settled); "
                        "client: one cumulative ack per batch (STOMP ack:client, AMQP a "
                        "first..last disposition); client-individual: one ack per message "
                        "(STOMP ack:client-individual, AMQP one disposition per delivery)")
    g.add_argument("--ack-receipt-every", type=int, default=0,
                   help="STOMP: request a receipt on every Nth ACK frame (0: none)")
    g.add_argument("--drain-timeout", type=float, default=10.0)
    g.add_argument("--nap-ms", type=float, default=4.0,
                   help="idle consumer poll interval in throughput runs (0: wake per arrival)")
    g.add_argument("--no-purge", dest="purge", action="store_false",
                   help="do not drain leftovers from the queue before each run")
    g.add_argument("--name", default="", help="scenario name in reports")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relaymq-bench",
        description="Broker-neutral load generator that measures the broker, not the client.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run one scenario (optionally against several targets)")
    _add_target_options(p_run)
    _add_scenario_options(p_run, suite=False)
    _add_output_options(p_run)
    p_suite = sub.add_parser("suite", help="run every scenario of a YAML suite file")
    p_suite.add_argument("file", help="suite file, e.g. bench/scenarios/standard.yaml")
    _add_target_options(p_suite)
    _add_scenario_options(p_suite, suite=True)
    _add_output_options(p_suite)
    p_rep = sub.add_parser("report", help="re-render tables/charts from JSON lines")
    p_rep.add_argument("files", nargs="+")
    p_rep.add_argument("--chart", default=None, metavar="PNG")
    p_rep.add_argument("--title", default="")
    sub.add_parser("selectors", help="selector evaluation benchmark (own options)",
                   add_help=False)
    return parser


def resolve_targets(args: argparse.Namespace) -> list[Target]:
    """Targets from --compare/--target/env, else one target from the shorthand options."""
    specs: list[str] = []
    if args.compare:
        specs += args.compare
    if args.target:
        specs += args.target
    if not specs and _env("TARGETS"):
        specs = [s for s in (_env("TARGETS") or "").split(";") if s.strip()]
    if specs:
        targets = [parse_target(s) for s in specs]
        labels = [t.label for t in targets]
        for i, t in enumerate(targets):
            if labels.count(t.label) > 1:
                t.label = f"{t.label}#{i + 1}"
        return targets
    urls = args.url or ([_env("URL")] if _env("URL") else [])
    target = Target(label=args.label or _env("LABEL") or "")
    if urls:
        for u in urls:
            ep = parse_url(u)
            target.endpoints[ep.protocol] = ep
    else:
        for proto, default in (("amqp", "amqp://127.0.0.1:5672"),
                               ("stomp", "stomp://127.0.0.1:61613")):
            url = getattr(args, f"{proto}_url") or _env(f"{proto.upper()}_URL", default)
            target.endpoints[proto] = parse_url(url)  # type: ignore[arg-type]
    pid = args.broker_pid if args.broker_pid is not None else _env("BROKER_PID")
    target.pid = int(pid) if pid else None
    target.pidfile = args.broker_pidfile or _env("BROKER_PIDFILE")
    target.style = args.style or _env("STYLE", "relaymq")  # type: ignore[assignment]
    if target.style not in STYLES:
        raise TargetError(f"unknown style {target.style!r}")
    target.user = args.user or _env("USER")
    target.password = args.password or _env("PASSWORD")
    if not target.label:
        target.label = target.style
    return [target]


def _scenario_from_args(args: argparse.Namespace, target: Target) -> Scenario:
    protocol = args.protocol
    if protocol is None:
        protocol = "amqp" if "amqp" in target.endpoints else next(iter(target.endpoints))
    values: dict[str, Any] = {
        "name": args.name, "protocol": protocol, "persistent": args.persistent,
        "mode": args.mode, "producers": args.producers, "consumers": args.consumers,
        "pattern": args.pattern, "rate": args.rate, "destination": args.destination,
        "max_inflight": args.max_inflight, "batch": args.batch, "credit": args.credit,
        "receipt_every": args.receipt_every, "ack": args.ack,
        "ack_receipt_every": args.ack_receipt_every,
        "drain_timeout": args.drain_timeout, "nap_ms": args.nap_ms, "purge": args.purge,
    }
    for key in ("size", "count", "duration", "runs", "warmup"):
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    return make_scenario(values)


class Output:
    """Where JSON lines, progress and the final summary go."""

    def __init__(self, args: argparse.Namespace):
        self.json_to: TextIO = sys.stdout if args.json == "-" else open(args.json, "a")
        self.quiet = args.quiet
        self.records: list[dict[str, Any]] = []
        self.failures: list[str] = []

    def record(self, r: dict[str, Any]) -> None:
        self.records.append(r)
        self.json_to.write(json_line(r) + "\n")
        self.json_to.flush()
        if not self.quiet:
            print(run_summary_line(r), file=sys.stderr, flush=True)
        if not r.get("ok"):
            self.failures.append(f"{r['target']} {r['scenario']} run {r['run']}: "
                                 f"lost {r.get('lost')} dup {r.get('duplicates')} "
                                 f"order {r.get('out_of_order')} {r.get('lost_examples')}")

    def log(self, msg: str) -> None:
        if not self.quiet:
            print(msg, file=sys.stderr, flush=True)

    def finish(self, args: argparse.Namespace, title: str) -> int:
        if args.title:
            title = args.title
        elif self.records:
            title = f"{title}: " + " vs ".join(dict.fromkeys(r["target"] for r in self.records))
        if self.json_to is not sys.stdout:
            self.json_to.close()
        text = markdown_table(self.records)
        targets = {r["target"] for r in self.records}
        if len(targets) > 1:
            text += "\n" + ratio_table(self.records)
        acks = per_ack_table(self.records)
        if acks:
            text += "\n" + acks
        if self.failures:
            text += "\n**Failures:**\n\n" + "".join(f"- {f}\n" for f in self.failures)
        print(("\n" if self.json_to is sys.stdout else "") + text, end="")
        if args.markdown:
            with open(args.markdown, "w") as fh:
                fh.write(f"## {title}\n\n" + text)
        if args.chart and self.records:
            from .chart import comparison_chart

            comparison_chart(self.records, args.chart, title)
            self.log(f"chart written to {args.chart}")
        return 1 if self.failures else 0


def _preflight(targets: list[Target], protocols: set[str]) -> None:
    for t in targets:
        for proto in sorted(protocols & set(t.endpoints)):
            check_reachable(t.endpoints[proto], t.label)
        pid = t.broker_pid()
        if pid is not None and not os.path.exists(f"/proc/{pid}/stat"):
            raise TargetError(f"broker pid {pid} of target {t.label!r} is not running")


def _execute(scenarios: list[Scenario], targets: list[Target], out: Output) -> None:
    """Each scenario: warm-up and measured runs, targets interleaved (A B A B ...)."""
    for sc in scenarios:
        eligible = [t for t in targets if sc.protocol in t.endpoints]
        if not eligible:
            out.log(f"skipping {sc.label}: no target has a {sc.protocol} URL")
            continue
        for i in range(sc.warmup + sc.runs):
            for t in eligible:
                try:
                    r = run_once(sc, t, i - sc.warmup, out.log)
                except RunError as exc:
                    out.failures.append(f"{t.label} {sc.label}: {exc}")
                    out.log(f"[{t.label}] {sc.label}: run failed: {exc}")
                    continue
                if i >= sc.warmup:
                    out.record(r)
                else:
                    out.log(f"[{t.label}] {sc.label}: warm-up run done")


def cmd_run(args: argparse.Namespace) -> int:
    targets = resolve_targets(args)
    sc = _scenario_from_args(args, targets[0])
    _preflight(targets, {sc.protocol})
    out = Output(args)
    _execute([sc], targets, out)
    return out.finish(args, sc.label)


def cmd_suite(args: argparse.Namespace) -> int:
    scenarios = load_suite(args.file)
    changes = {k: getattr(args, k) for k in ("size", "count", "duration", "runs", "warmup")
               if getattr(args, k) is not None}
    if "duration" in changes:
        changes["count"] = None
    elif "count" in changes:
        changes["duration"] = None
    scenarios = [replace(s, **changes).validate() for s in scenarios]
    if args.protocol:
        scenarios = [s for s in scenarios if s.protocol == args.protocol]
    if args.only:
        scenarios = [s for s in scenarios if args.only in s.label]
    if not scenarios:
        raise ScenarioError("no scenario left after filtering")
    targets = resolve_targets(args)
    _preflight(targets, {s.protocol for s in scenarios})
    out = Output(args)
    _execute(scenarios, targets, out)
    return out.finish(args, os.path.basename(args.file))


def cmd_report(args: argparse.Namespace) -> int:
    records = load_jsonl(args.files)
    text = markdown_table(records)
    if len({r["target"] for r in records}) > 1:
        text += "\n" + ratio_table(records)
    acks = per_ack_table(records)
    if acks:
        text += "\n" + acks
    print(text, end="")
    if args.chart:
        from .chart import comparison_chart

        comparison_chart(records, args.chart, args.title)
        print(f"chart written to {args.chart}", file=sys.stderr)
    return 0


def cmd_selectors(argv: Sequence[str]) -> int:
    """Delegate to selector_bench (imported lazily: it may pull in the broker core)."""
    from . import selector_bench  # type: ignore[attr-defined]

    rc = selector_bench.main(list(argv))
    return int(rc or 0)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "selectors":
        return cmd_selectors(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "suite":
            return cmd_suite(args)
        return cmd_report(args)
    except (TargetError, ScenarioError, ProcessLookupError, OSError) as exc:
        print(f"relaymq-bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("relaymq-bench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
