"""Reports (Markdown, ratios, charts) and the command line, without any broker."""

from __future__ import annotations

import json
import socket
import sys
import types
from pathlib import Path

import pytest
import relaymq_bench
from relaymq_bench import cli, report

STANDARD = str(Path(__file__).resolve().parents[1] / "scenarios" / "standard.yaml")


def rec(target: str, run: int, send: float, cpu: float, scenario: str = "amqp-x",
        lost: int = 0, meaningful: bool = True) -> dict:
    return {
        "scenario": scenario, "target": target, "run": run, "send_rate": send,
        "recv_rate": send / 2, "latency_us": {"p50": 1500.0, "p95": 2000.0, "p99": 2500.0,
                                              "max": 9000.0},
        "broker_cpu_us_per_msg": cpu, "broker_rss_peak_mb": 100.0,
        "client_send_cpu_us_per_msg": 1.5, "client_recv_cpu_us_per_msg": 2.5,
        "lost": lost, "duplicates": 0, "out_of_order": 0, "ok": not lost,
        "latency_meaningful": meaningful,
    }


RECORDS = [rec("relaymq", 0, 19000, 40.0), rec("rabbit", 0, 10000, 100.0),
           rec("relaymq", 1, 17000, 44.0), rec("rabbit", 1, 12000, 90.0),
           rec("relaymq", 2, 18000, 42.0), rec("rabbit", 2, 11000, 110.0)]


def test_markdown_table_shows_median_and_range():
    table = report.markdown_table(RECORDS)
    lines = table.splitlines()
    assert lines[0].startswith("| scenario | target | runs | send msg/s |")
    relay = next(line for line in lines if "| relaymq |" in line)
    assert "18.0k (17.0k–19.0k)" in relay and "42.0 (40.0–44.0)" in relay
    assert relay.endswith("| ok |")
    assert "1.50" in relay  # p50 in ms


def test_sequential_latency_is_flagged_and_loss_is_shown():
    table = report.markdown_table([rec("a", 0, 1, 1, lost=3, meaningful=False)])
    assert "⁽ᵠ⁾" in table and "waited in the queue" in table
    assert "lost 3, dup 0, order 0" in table


def test_ratios_against_first_target():
    rows = report.ratios(RECORDS)
    assert len(rows) == 1
    row = rows[0]
    assert row["target"] == "rabbit" and row["reference"] == "relaymq"
    assert row["send_rate"] == pytest.approx(11000 / 18000)
    assert row["broker_cpu_us_per_msg"] == pytest.approx(100 / 42)
    text = report.ratio_table(RECORDS)
    assert "rabbit ÷ relaymq" in text and "×2.38" in text


def test_chart_is_a_png(tmp_path):
    from relaymq_bench.chart import comparison_chart

    out = comparison_chart(RECORDS + [rec("relaymq", 0, 5000, 60.0, scenario="stomp-x")],
                           str(tmp_path / "c.png"), "test")
    data = Path(out).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_report_command_reads_jsonl(tmp_path, capsys):
    f = tmp_path / "runs.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in RECORDS) + "not json\n")
    assert cli.main(["report", str(f)]) == 0
    out = capsys.readouterr().out
    assert "| relaymq |" in out and "rabbit ÷ relaymq" in out


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_suite_fails_clearly_when_nothing_listens(capsys):
    port = _closed_port()
    rc = cli.main(["suite", STANDARD, "--amqp-url", f"amqp://127.0.0.1:{port}",
                   "--stomp-url", f"stomp://127.0.0.1:{port}"])
    assert rc == 2
    err = capsys.readouterr().err
    assert f"nothing is listening on 127.0.0.1:{port}" in err


def test_env_provides_default_target(monkeypatch):
    monkeypatch.setenv("RELAYMQ_BENCH_AMQP_URL", "amqp://10.0.0.1:7000")
    monkeypatch.setenv("RELAYMQ_BENCH_BROKER_PID", "77")
    monkeypatch.setenv("RELAYMQ_BENCH_STYLE", "activemq")
    args = cli.build_parser().parse_args(["suite", STANDARD])
    (t,) = cli.resolve_targets(args)
    assert t.endpoints["amqp"].port == 7000 and t.endpoints["stomp"].port == 61613
    assert t.pid == 77 and t.style == "activemq" and t.label == "activemq"


def test_defaults_are_local_relaymq(monkeypatch):
    for k in ("URL", "AMQP_URL", "STOMP_URL", "BROKER_PID", "STYLE", "TARGETS"):
        monkeypatch.delenv("RELAYMQ_BENCH_" + k, raising=False)
    (t,) = cli.resolve_targets(cli.build_parser().parse_args(["suite", STANDARD]))
    assert t.endpoints["amqp"].url == "amqp://127.0.0.1:5672"
    assert t.endpoints["stomp"].url == "stomp://127.0.0.1:61613"
    assert t.style == "relaymq" and t.pid is None


def test_compare_targets_keep_order_and_unique_labels():
    args = cli.build_parser().parse_args(
        ["run", "--compare", "a=amqp://h:1", "a=amqp://h:2", "label=b,url=stomp://h:3"])
    labels = [t.label for t in cli.resolve_targets(args)]
    assert labels == ["a#1", "a#2", "b"]


def test_run_options_become_a_scenario():
    args = cli.build_parser().parse_args(
        ["run", "--url", "stomp://h:1", "--persistent", "--mode", "sequential", "--topic",
         "--consumers", "3", "--rate", "1000", "--count", "50", "--receipt-every", "10"])
    (t,) = cli.resolve_targets(args)
    s = cli._scenario_from_args(args, t)
    assert (s.protocol, s.persistent, s.mode, s.pattern, s.consumers, s.rate, s.count,
            s.receipt_every) == ("stomp", True, "sequential", "topic", 3, 1000.0, 50, 10)


def test_selectors_subcommand_is_delegated_lazily(monkeypatch):
    seen = {}

    def fake_main(argv):
        seen["argv"] = argv
        return 0

    fake = types.ModuleType("relaymq_bench.selector_bench")
    fake.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "relaymq_bench.selector_bench", fake)
    monkeypatch.setattr(relaymq_bench, "selector_bench", fake, raising=False)
    assert cli.main(["selectors", "--count", "5"]) == 0
    assert seen["argv"] == ["--count", "5"]


def test_per_ack_cost_subtracts_the_auto_twin():
    def run(scenario: str, ack: str, cpu: float, acks_per_msg: float | None) -> dict:
        r = rec("relaymq", 0, 10000, cpu, scenario=scenario)
        r.update({"protocol": "stomp", "mode": "concurrent", "pattern": "queue",
                  "persistent": False, "size": 1024, "producers": 1, "consumers": 1,
                  "rate_target": None, "ack": ack, "acks_per_msg": acks_per_msg,
                  "settings": {"ack": ack, "ack_receipt_every": 0}})
        return r

    records = [run("auto", "auto", 12.0, 0.0), run("indiv", "client-individual", 18.0, 1.0),
               run("indiv", "client-individual", 20.0, 1.0),
               run("cumulative", "client", 12.5, 0.002)]
    rows = {r["scenario"]: r for r in report.per_ack(records)}
    assert set(rows) == {"indiv", "cumulative"}  # auto is the baseline, not a row
    assert rows["indiv"]["broker_cpu_us_per_ack"] == pytest.approx(7.0)  # median 19 - 12
    assert rows["cumulative"]["broker_cpu_us_per_ack"] == pytest.approx(250.0)
    table = report.per_ack_table(records)
    assert "| indiv | relaymq | client-individual | – | 1.00 | 19.00 | 12.00 | 7.00 |" in table
