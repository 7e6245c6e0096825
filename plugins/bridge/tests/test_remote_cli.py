"""`relaymq bridge list|status|start|stop|pause|resume` against a running broker
process that hosts real bridges (local queue to local queue over its own AMQP
connector), through the console's REST API, with relaymq-auth users."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from bridge_helpers import RELAYMQ, free_port
from click.testing import CliRunner, Result
from relaymq.testing import wait_until
from relaymq.testing.console_broker import ADMIN, APP, VIEWER, ConsoleBrokerProcess

pytest.importorskip("relaymq_console", reason="relaymq-console is not installed")
pytest.importorskip("relaymq_auth", reason="relaymq-auth is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
from relaymq_bridge.cli import bridge as bridge_group  # noqa: E402


class BridgeBroker(ConsoleBrokerProcess):
    """Two bridges between local queues, through its own vm:// connector."""

    def __init__(self, tmp: Path) -> None:
        self.stomp_port, self.amqp_port = free_port(), free_port()
        creds = f'source-user="{APP[0]}" source-password="{APP[1]}" ' \
                f'target-user="{APP[0]}" target-password="{APP[1]}"'
        super().__init__(tmp, "bridge-cli", attributes='persistent="false"', body=f"""
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.amqp_port}"/>
  </transportConnectors>
  <bridges>
    <bridge name="fwd" source-uri="vm://localhost" source-destination="queue://cli.src"
            target-uri="vm://localhost" target-destination="queue://cli.dst" {creds}
            quality-of-service="DUPLICATES_OK" failure-retry-interval="200"/>
    <bridge name="idle" source-uri="vm://localhost" source-destination="queue://cli.src2"
            target-uri="vm://localhost" target-destination="queue://cli.dst2" {creds}
            auto-start="false" failure-retry-interval="200"/>
  </bridges>""")
        self.start()

    def depth(self, queue: str) -> int:
        r = httpx.get(f"{self.url}/api/v1/queues/{queue}", auth=ADMIN, timeout=10)
        return int(r.json()["depth"]) if r.status_code == 200 else 0

    def send(self, queue: str, count: int) -> None:
        receipts: list[str] = []

        class L(stomp.ConnectionListener):
            def on_receipt(self, frame: Any) -> None:
                receipts.append(frame.headers["receipt-id"])

        conn = stomp.Connection12([("127.0.0.1", self.stomp_port)])
        conn.set_listener("", L())
        conn.connect(*APP, wait=True)
        for i in range(count):
            conn.send(f"/queue/{queue}", f"m{i}", headers={"receipt": f"r{i}"})
        wait_until(lambda: len(receipts) == count, "receipts", 10)
        conn.disconnect()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = BridgeBroker(tmp_path_factory.mktemp("bridge-cli"))
    yield b
    b.stop()


def cli(broker: BridgeBroker, *args: str, who: tuple[str, str] | None = ADMIN,
        url: str | None = None) -> subprocess.CompletedProcess[str]:
    cred = ["--user", who[0], "--password", who[1]] if who else []
    return subprocess.run([RELAYMQ, "bridge", *args, "--url", url or broker.url, *cred],
                          capture_output=True, text=True, timeout=60)


def in_process(*args: str, env: dict[str, str | None] | None = None) -> Result:
    """`relaymq bridge ARGS` run in this process (the same click group): for checks of
    the commands' own logic (option > environment > file, error lines, exit codes),
    which would otherwise pay a Python start and a relaymq import each. Every command
    also runs as a real `relaymq` process through `cli`."""
    return CliRunner().invoke(bridge_group, list(args), env=env, catch_exceptions=False)


def state(broker: BridgeBroker, name: str) -> str:
    """The bridge's state from the console's API (what `relaymq bridge status` reads):
    the precondition polls need no process of their own."""
    r = httpx.get(f"{broker.url}/api/v1/bridges/{name}", auth=ADMIN, timeout=10)
    assert r.status_code == 200, r.text
    return str(r.json()["state"])


def test_list_shows_both_bridges_with_their_states(broker) -> None:
    wait_until(lambda: state(broker, "fwd") == "running", "fwd running", 30)
    r = cli(broker, "list", "--json")
    assert r.returncode == 0, r.stderr
    states = {b["name"]: b["state"] for b in json.loads(r.stdout)}
    assert states == {"fwd": "running", "idle": "stopped"}
    # the table is the command's formatting: read in this process
    table = in_process("list", "--url", broker.url, "--user", ADMIN[0], "--password", ADMIN[1])
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["name", "state", "quality_of_service"]
    assert any(line.split()[:3] == ["fwd", "running", "DUPLICATES_OK"] for line in lines[1:])


def test_stop_holds_messages_and_start_forwards_them(broker) -> None:
    wait_until(lambda: state(broker, "fwd") == "running", "fwd running", 30)
    broker.send("cli.src", 3)
    wait_until(lambda: broker.depth("cli.dst") == 3, "three bridged messages", 30)
    status = cli(broker, "status", "fwd")
    assert status.returncode == 0 and "forwarded: 3" in status.stdout.splitlines(), status.stdout

    r = cli(broker, "stop", "fwd")
    assert r.returncode == 0 and r.stdout.strip() == "fwd: stopped", (r.stdout, r.stderr)
    src = httpx.get(f"{broker.url}/api/v1/queues/cli.src", auth=ADMIN).json()
    assert src["consumers"] == 0  # the bridge's consumer is gone
    broker.send("cli.src", 2)
    assert broker.depth("cli.src") == 2 and broker.depth("cli.dst") == 3

    r = cli(broker, "start", "fwd")
    assert r.returncode == 0 and r.stdout.startswith("fwd: "), (r.stdout, r.stderr)
    wait_until(lambda: broker.depth("cli.dst") == 5, "the held messages bridged", 30)
    assert broker.depth("cli.src") == 0


def test_pause_and_resume(broker) -> None:
    wait_until(lambda: state(broker, "fwd") == "running", "fwd running", 30)
    r = cli(broker, "pause", "fwd", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "paused", r.stderr
    r = cli(broker, "resume", "fwd")
    assert r.returncode == 0 and r.stdout.strip() == "fwd: running", (r.stdout, r.stderr)


def test_start_a_bridge_configured_without_auto_start(broker) -> None:
    assert state(broker, "idle") == "stopped"
    broker.send("cli.src2", 1)
    assert cli(broker, "start", "idle").returncode == 0
    wait_until(lambda: broker.depth("cli.dst2") == 1, "idle's message bridged", 30)
    assert state(broker, "idle") == "running"


def test_refusals_are_one_clear_line_and_exit_1(broker) -> None:
    r = cli(broker, "stop", "fwd", who=VIEWER)
    assert r.returncode == 1 and "403" in r.stderr and "may only view" in r.stderr, r.stderr
    assert state(broker, "fwd") != "stopped"
    r = cli(broker, "status", "nope")
    assert r.returncode == 1 and "no bridge named 'nope'" in r.stderr, r.stderr
    assert "fwd" in r.stderr  # the configured names are listed
    r2 = in_process("list", "--url", broker.url, "--user", "ops", "--password", "wrong")
    assert r2.exit_code == 1 and "401" in r2.stderr, r2.stderr
    r2 = in_process("list", "--url", f"http://127.0.0.1:{free_port()}", "--user", ADMIN[0],
                    "--password", ADMIN[1])
    assert r2.exit_code == 1 and "cannot reach the console" in r2.stderr, r2.stderr


def test_credentials_from_the_environment(broker) -> None:
    r = subprocess.run([RELAYMQ, "bridge", "list", "--json"], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "RELAYMQ_CONSOLE_URL": broker.url,
                                        "RELAYMQ_USER": VIEWER[0], "RELAYMQ_PASSWORD": VIEWER[1]})
    assert r.returncode == 0, r.stderr
    assert {b["name"] for b in json.loads(r.stdout)} == {"fwd", "idle"}


@pytest.mark.external  # chromium
def test_the_console_page_pauses_and_resumes_a_bridge(broker, tmp_path) -> None:
    import shutil

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium (Debian package chromium) is not installed")
    wait_until(lambda: state(broker, "fwd") == "running", "fwd running", 30)
    shots = Path(os.environ.get("RELAYMQ_ARTIFACTS") or tmp_path)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium,
                                    args=["--headless=new", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.goto(f"{broker.url}/login")
            page.fill("#username", ADMIN[0])
            page.fill("#password", ADMIN[1])
            page.click("#login-button")
            page.wait_for_selector("#broker-facts")
            page.goto(f"{broker.url}/broker-connections")
            kinds = {r.get_attribute("data-name"): r.locator("td").nth(1).text_content()
                     for r in page.locator("#items tr[data-name]").all()}
            assert kinds == {"fwd": "bridge", "idle": "bridge"}
            row = page.locator("#bridges tr[data-name=fwd]")
            assert row.locator("td.state").text_content() == "running"
            row.locator("button.pause").click()
            page.wait_for_selector("#flash")
            assert page.text_content("#flash") == "bridge fwd: paused"
            assert page.locator("#bridges tr[data-name=fwd] td.state").text_content() == "paused"
            assert state(broker, "fwd") == "paused"
            page.screenshot(path=str(shots / "bridge-paused.png"), full_page=True)
            page.locator("#bridges tr[data-name=fwd] button.resume").click()
            page.wait_for_selector("#flash")
            assert page.text_content("#flash") == "bridge fwd: running"
            assert state(broker, "fwd") == "running"
        finally:
            browser.close()


def test_metrics_show_a_paused_bridges_waiting_messages(broker) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    def pending() -> dict[str, float]:
        text = httpx.get(f"{broker.url}/metrics", auth=ADMIN, timeout=10).text
        family = next(f for f in text_string_to_metric_families(text)
                      if f.name == "relaymq_broker_connection_pending_messages")
        return {s.labels["connection"]: s.value for s in family.samples
                if s.labels["kind"] == "bridge"}

    wait_until(lambda: state(broker, "fwd") == "running", "fwd running", 30)
    before = broker.depth("cli.dst")
    assert cli(broker, "pause", "fwd").returncode == 0
    try:
        broker.send("cli.src", 2)
        wait_until(lambda: pending().get("fwd") == 2, "two messages waiting in the bridge", 30)
    finally:
        assert cli(broker, "resume", "fwd").returncode == 0
    wait_until(lambda: pending().get("fwd") == 0 and broker.depth("cli.dst") == before + 2,
               "the waiting messages forwarded", 30)


def test_the_admin_cli_config_file(broker, tmp_path: Path) -> None:
    """`relaymq bridge` reads the admin CLI's TOML file (docs/console.md): `--config`,
    RELAYMQ_CLI_CONFIG, else $XDG_CONFIG_HOME/relaymq/cli.toml; an option beats its
    environment variable, which beats the file; a bad file is one line and exit 1."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("RELAYMQ_CONSOLE_URL", "RELAYMQ_USER", "RELAYMQ_PASSWORD",
                          "RELAYMQ_CLI_CONFIG", "XDG_CONFIG_HOME")}

    unset: dict[str, str | None] = dict.fromkeys(
        ("RELAYMQ_CONSOLE_URL", "RELAYMQ_USER", "RELAYMQ_PASSWORD", "RELAYMQ_CLI_CONFIG",
         "XDG_CONFIG_HOME"))

    def run(*args: str, **env: str) -> Result:
        # the precedence rules are the command's logic: checked in this process
        return in_process(*args, env={**unset, **env})

    good = tmp_path / "cli.toml"
    good.write_text(f'url = "{broker.url}"\nuser = "{ADMIN[0]}"\npassword = "{ADMIN[1]}"\n')
    good.chmod(0o600)
    # one real process reads the file named by --config
    p = subprocess.run([RELAYMQ, "bridge", "list", "--json", "--config", str(good)],
                       capture_output=True, text=True, timeout=60, env=clean)
    assert p.returncode == 0, p.stderr
    assert {b["name"] for b in json.loads(p.stdout)} == {"fwd", "idle"}
    r = run("status", "fwd", "--json", RELAYMQ_CLI_CONFIG=str(good))
    assert r.exit_code == 0 and json.loads(r.stdout)["name"] == "fwd", r.stderr
    xdg = tmp_path / "xdg"
    (xdg / "relaymq").mkdir(parents=True)
    (xdg / "relaymq" / "cli.toml").write_text(good.read_text())
    r = run("status", "fwd", "--json", XDG_CONFIG_HOME=str(xdg))
    assert r.exit_code == 0 and json.loads(r.stdout)["name"] == "fwd", r.stderr

    # the file names a wrong password and a dead URL: options and environment win
    stale = tmp_path / "stale.toml"
    stale.write_text(f'url = "http://127.0.0.1:{free_port()}"\nuser = "{ADMIN[0]}"\n'
                     'password = "wrong"\n')
    r = run("list", "--json", "--config", str(stale))
    assert r.exit_code == 1 and "cannot reach the console" in r.stderr, r.stderr
    r = run("list", "--json", "--config", str(stale), "--url", broker.url)
    assert r.exit_code == 1 and r.stderr.startswith("Error: 401"), r.stderr
    r = run("list", "--json", "--config", str(stale), "--url", broker.url,
            RELAYMQ_PASSWORD=ADMIN[1])
    assert r.exit_code == 0, r.stderr
    r = run("list", "--json", "--config", str(stale), RELAYMQ_CONSOLE_URL=broker.url,
            RELAYMQ_PASSWORD="wrong-too")
    assert r.exit_code == 1 and "401" in r.stderr, r.stderr
    r = run("list", "--json", "--config", str(stale), "--password", ADMIN[1],
            RELAYMQ_CONSOLE_URL=broker.url, RELAYMQ_PASSWORD="wrong-too")
    assert r.exit_code == 0, r.stderr

    bad = tmp_path / "bad.toml"
    bad.write_text("url = [unclosed\n")
    r = run("list", "--config", str(bad))
    assert r.exit_code == 1 and "not valid TOML" in r.stderr and len(r.stderr.splitlines()) == 1
    bad.write_text('url = "x"\ncolour = "red"\n')
    r = run("list", "--config", str(bad))
    assert r.exit_code == 1 and "unknown setting(s) colour" in r.stderr, r.stderr
    r = run("list", "--config", str(tmp_path / "missing.toml"))
    assert r.exit_code == 1 and "cannot read" in r.stderr, r.stderr
