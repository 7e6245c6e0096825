"""`relaymq selector-cache show FILE`, as the relaymq command finds it."""

from __future__ import annotations

import json

from click.testing import CliRunner
from relaymq.cli import main

DOC = {"format": "relaymq-selector-cache", "version": 1, "destinations": {
    "queue://Consumer.A.VirtualTopic.Orders": [{"selector": "TRUE"},
                                               {"selector": "color = 'red'"}],
    "queue://Consumer.B.VirtualTopic.Orders": [{"selector": "n > 1", "stringConversion": True}],
}}


def run(*args: str):
    return CliRunner().invoke(main, ["selector-cache", *args])


def test_show(tmp_path):
    path = tmp_path / "selectorcache.json"
    path.write_text(json.dumps(DOC))
    result = run("show", str(path))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{path}: 3 selector(s) for 2 queue(s)",
        "  queue://Consumer.A.VirtualTopic.Orders: TRUE, \"color = 'red'\"",
        "  queue://Consumer.B.VirtualTopic.Orders: 'n > 1' (string conversion)",
    ]


def test_show_json(tmp_path):
    path = tmp_path / "selectorcache.json"
    path.write_text(json.dumps(DOC))
    result = run("show", "--json", str(path))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == DOC["destinations"]


def test_show_reports_a_corrupt_file_without_touching_it(tmp_path):
    path = tmp_path / "selectorcache.json"
    path.write_text("{oops")
    result = run("show", str(path))
    assert result.exit_code == 1
    assert "is not a usable selector cache: it is not JSON" in result.output
    assert path.read_text() == "{oops"


def test_show_a_missing_file(tmp_path):
    result = run("show", str(tmp_path / "nope.json"))
    assert result.exit_code == 1
    assert "does not exist" in result.output


def test_the_command_is_listed():
    result = CliRunner().invoke(main, ["--help"])
    assert "selector-cache" in result.output


def test_forget_one_selector_then_a_whole_queue(tmp_path):
    path = tmp_path / "selectorcache.json"
    path.write_text(json.dumps(DOC))
    result = run("forget", str(path), "Consumer.A.VirtualTopic.Orders", "--selector",
                 "color = 'red'")
    assert result.exit_code == 0, result.output
    assert result.output == "queue://Consumer.A.VirtualTopic.Orders: TRUE\n"
    result = run("forget", str(path), "queue://Consumer.B.VirtualTopic.Orders")
    assert result.exit_code == 0, result.output
    assert json.loads(path.read_text())["destinations"] == {
        "queue://Consumer.A.VirtualTopic.Orders": [{"selector": "TRUE"}]}


def test_forget_something_unknown(tmp_path):
    path = tmp_path / "selectorcache.json"
    path.write_text(json.dumps(DOC))
    result = run("forget", str(path), "queue://Nope")
    assert result.exit_code == 1
    assert "has no selectors for queue://Nope" in result.output
    assert json.loads(path.read_text()) == DOC
