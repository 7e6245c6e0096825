"""Smoke test of the selector micro-benchmark (relaymq_bench.selector_bench)."""

from __future__ import annotations

import json

import pytest

selector_bench = pytest.importorskip("relaymq_bench.selector_bench")


def test_bench_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert selector_bench.main(["--repeat", "1", "--number", "200"]) == 0
    out = capsys.readouterr().out
    for name, _ in selector_bench.CASES:
        assert name in out
    assert "ns/eval" in out


def test_bench_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert selector_bench.main(["--repeat", "1", "--number", "200", "--json", "--no-view"]) == 0
    payload = json.loads(capsys.readouterr().out)
    names = [r["case"] for r in payload["results"]]
    assert "one comparison" in names and "IN with 10 values" in names
    assert all(r["dict_ns"] > 0 and r["view_ns"] is None for r in payload["results"])
    assert payload["compile_uncached_us"] > 0
