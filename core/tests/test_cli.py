"""The relaymq command: config check, plugins list, run (CliRunner and real processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from relaymq.cli import main

GOOD = """<broker xmlns="http://activemq.apache.org/schema/core" brokerName="${name}"
        dataDirectory="${activemq.data}" useJmx="true">
  <managementContext><managementContext createConnector="false" connectorPort="1099"/></managementContext>
  <plugins><redeliveryPlugin/></plugins>
  <destinations><queue physicalName="A"/></destinations>
  <transportConnectors>
    <transportConnector name="openwire" uri="tcp://0.0.0.0:61616"/>
  </transportConnectors>
</broker>
"""

BAD = """<broker persistent="perhaps">
  <persistenceAdapter><levelDB/></persistenceAdapter>
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue=">" queuePrefetch="abc"/>
  </policyEntries></policyMap></destinationPolicy>
  <plugins><redeliveryPlugn/></plugins>
  <destinations><queue physicalName="${undefined.name}"/></destinations>
</broker>
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write(tmp_path: Path, text: str, name: str = "activemq.xml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_config_check_ok_prints_a_summary_and_warnings(runner, tmp_path) -> None:
    path = write(tmp_path, GOOD)
    result = runner.invoke(main, ["config", "check", "--allow-vm-only", str(path), "-D", "name=b7"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"{path}: OK" in out
    assert "broker: b7 (persistent=true" in out
    assert "persistence: memoryPersistenceAdapter" in out
    assert "not available (no plugin serves them): openwire tcp://0.0.0.0:61616" in out
    assert "plugins: redeliveryPlugin" in out
    assert "1 warning(s):" in out
    assert 'note: <managementContext connectorPort="1099"> at' in out
    assert "will be skipped" in out and "RelayMQ does not speak OpenWire" in out
    assert "note: <broker useJmx=" in out


def test_config_check_lists_every_error_and_exits_1(runner, tmp_path) -> None:
    path = write(tmp_path, BAD)
    result = runner.invoke(main, ["config", "check", str(path)])
    assert result.exit_code == 1
    out = result.output
    assert "6 error(s)" in out
    assert "this broker would serve only vm://" in out
    assert f'<broker persistent="perhaps"> at {path}:1: expected true or false' in out
    assert f'<policyEntry queuePrefetch="abc"> at {path}:4: expected an integer' in out
    assert f"${{undefined.name}} at {path}:7 is not defined" in out
    # plugins are resolved even though the file had errors, so one run lists everything
    assert f"<levelDB> at {path}:2 needs a persistence adapter named 'levelDB'" in out
    assert f"<redeliveryPlugn> at {path}:6" in out and "did you mean redeliveryPlugin?" in out


def test_config_check_reports_missing_plugins_when_the_file_loads(runner, tmp_path) -> None:
    path = write(tmp_path, "<broker>\n<persistenceAdapter><levelDB/></persistenceAdapter>\n"
                           "<plugins><redeliveryPlugn/></plugins></broker>")
    result = runner.invoke(main, ["config", "check", str(path)])
    assert result.exit_code == 1
    assert "3 error(s)" in result.output
    assert f"<levelDB> at {path}:2 needs a persistence adapter" in result.output
    assert "did you mean redeliveryPlugin?" in result.output


def test_config_check_strict(runner, tmp_path) -> None:
    path = write(tmp_path, GOOD.replace("<plugins>", "<shutdownHooks/>\n  <plugins>"))
    result = runner.invoke(main, ["config", "check", "--strict", str(path), "-D", "name=x"])
    assert result.exit_code == 1
    assert "(an error because of --strict)" in result.output
    assert "will be skipped" in result.output


def test_bad_define(runner, tmp_path) -> None:
    result = runner.invoke(main, ["config", "check", str(write(tmp_path, GOOD)), "-D", "novalue"])
    assert result.exit_code == 2
    assert "'novalue' is not NAME=VALUE" in result.output


def test_plugins_list(runner, tmp_path) -> None:
    result = runner.invoke(main, ["plugins", "list"])
    assert result.exit_code == 0, result.output
    assert "relaymq 0.1.0" in result.output
    assert "persistence: memoryPersistenceAdapter" in result.output
    assert "enabled by <default config>:" in result.output

    path = write(tmp_path, "<broker><persistenceAdapter><levelDB/></persistenceAdapter>"
                           "<plugins><redeliveryPlugin/></plugins></broker>")
    result = runner.invoke(main, ["plugins", "list", "--config", str(path)])
    assert "redeliveryPlugin [enabled]" in result.output
    assert "named by the configuration but not installed:" in result.output
    assert f"<levelDB> at {path}:1 (persistence)" in result.output


def test_plugins_list_json(runner) -> None:
    result = runner.invoke(main, ["plugins", "list", "--json"])
    data = json.loads(result.output)
    kernel = next(d for d in data["distributions"] if d["name"] == "relaymq")
    assert {"name": "vm", "enabled": True} in kernel["provides"]["relaymq.transports"]
    assert data["config"] == "<default config>"


def test_run_reports_config_errors_and_exits_1(runner, tmp_path) -> None:
    path = write(tmp_path, BAD)
    result = runner.invoke(main, ["run", "--config", str(path)])
    assert result.exit_code == 1
    check = runner.invoke(main, ["config", "check", str(path)])
    # one validation path: run lists the same errors, in the same words, as config check
    assert "6 error(s)" in result.output
    assert result.output == check.output


def relaymq(*args: str, **kw) -> list[str]:
    return [sys.executable, "-m", "relaymq.cli", *args]


def test_real_process_config_check(tmp_path) -> None:
    good = write(tmp_path, GOOD)
    done = subprocess.run(relaymq("config", "check", "--allow-vm-only", str(good), "-D", "name=proc"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "broker: proc" in done.stdout
    bad = write(tmp_path, BAD, "bad.xml")
    done = subprocess.run(relaymq("config", "check", str(bad)), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert "6 error(s)" in done.stderr


def test_real_process_run_stops_gracefully_on_sigterm(tmp_path) -> None:
    config = write(tmp_path, '<broker brokerName="sig" persistent="false">'
                             '<plugins><redeliveryPlugin/></plugins></broker>')
    proc = subprocess.Popen(relaymq("run", "--allow-vm-only", "--config", str(config)),
                            stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 30
        assert proc.stderr is not None
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "listening on" in line:
                break
        assert any("broker sig listening on vm://sig only" in ln for ln in lines), lines
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = "".join(lines) + (rest or "")
    assert proc.returncode == 0, log
    assert "configured broker_plugins: redeliveryPlugin" in log
    assert "stopping broker sig" in log and "broker sig stopped" in log


def test_config_check_warns_about_attributes_a_plugin_ignores(runner, tmp_path) -> None:
    path = write(tmp_path, """<broker brokerName="b1">
  <persistenceAdapter><memoryPersistenceAdapter bogusAttribute="1"/></persistenceAdapter>
</broker>""")
    result = runner.invoke(main, ["config", "check", "--allow-vm-only", str(path)])
    assert result.exit_code == 0, result.output
    assert "1 warning(s):" in result.output
    assert f"<memoryPersistenceAdapter> at {path}:2: attribute 'bogusAttribute' is ignored" in result.output
    strict = runner.invoke(main, ["config", "check", "--allow-vm-only", "--strict", str(path)])
    assert strict.exit_code == 1
    assert "'bogusAttribute' is ignored" in strict.output and "--strict" in strict.output
