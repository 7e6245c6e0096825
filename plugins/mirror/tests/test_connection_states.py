"""What an operator sees of a mirror that is not working, on a `relaymq run`
process (kahaDB: the mirror starts after its connection's first attempts), read
through the console as a user reads it:

* a target unreachable from the start shows `target unreachable (retrying)`
  with the error, not `stopped`, and the failed attempts are logged once, not
  at every retry;
* a refused mirror (the target is the broker itself) is not reported as up;
* a sync while the mirror is not connected answers 409 with the reason;
* `start` on a connection whose reconnect attempts are used up starts it again;
* `relaymq mirror list|status|start|stop|sync` show and do the same from a shell.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mirrortools import BrokerProcess, free_port
from relaymq.testing.waits import wait_until

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))

pytest.importorskip("relaymq_console", reason="relaymq-console is not installed (the tests "
                    "read the broker's management listings through it)")


def connection_xml(name: str, port: int, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return (f'<amqp-connection uri="tcp://127.0.0.1:{port}" name="{name}" '
            f'retry-interval="100"{extra}><mirror/></amqp-connection>')


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    tmp: Path = tmp_path_factory.mktemp("states")
    b = BrokerProcess(tmp, "b")  # started by a test: until then GIVEUP's target is down
    a = BrokerProcess(tmp, "a", console=True)
    a.mirrors = ("<broker-connections>"
                 + connection_xml("NOWHERE", free_port())
                 + connection_xml("SELF", a.port)
                 + connection_xml("GIVEUP", b.port, reconnect_attempts="2")
                 + "</broker-connections>")
    a.start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def row(a: BrokerProcess, name: str) -> dict[str, Any]:
    return next(r for r in a.api("broker-connections")["items"] if r["name"] == name)


def mirror(a: BrokerProcess, name: str) -> dict[str, Any]:
    return dict(row(a, name)["detail"]["operations"][0])


def post(a: BrokerProcess, path: str) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"http://127.0.0.1:{a.http_port}/api/v1/{path}", data=b"",
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_target_unreachable_from_the_start_is_shown_and_logged_once(
        brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, _b = brokers
    wait_until(lambda: row(a, "NOWHERE")["detail"]["retries"] >= 10, "ten failed attempts",
               timeout=30, detail=lambda: repr(row(a, "NOWHERE")))
    state = mirror(a, "NOWHERE")
    assert state["state"] == "target unreachable (retrying)", state
    assert "refused" in (state["last_error"] or "").lower(), state
    assert row(a, "NOWHERE")["up"] is False
    log = a.log.read_text()
    attempts = [line for line in log.splitlines()
                if "connection NOWHERE to" in line and "failed" in line]
    assert len(attempts) == 1, attempts  # once per host and error, not at every retry
    unreachable = [line for line in log.splitlines()
                   if "mirror NOWHERE: target unreachable" in line]
    assert len(unreachable) == 1, unreachable


def test_a_refused_mirror_is_not_up(brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, _b = brokers
    wait_until(lambda: mirror(a, "SELF")["state"] == "refused by the target",
               "the mirror to itself refused", timeout=30, detail=lambda: repr(mirror(a, "SELF")))
    assert "itself" in mirror(a, "SELF")["last_error"]
    r = row(a, "SELF")
    assert r["detail"]["connected"] is True  # the connection is open, the mirror is not working
    assert r["up"] is False


def test_a_sync_without_the_target_answers_409_with_the_reason(
        brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, _b = brokers
    status, body = post(a, "broker-connections/NOWHERE/sync")
    assert status == 409, body
    assert "not connected to its target" in body["error"]
    assert "Traceback" not in a.log.read_text()  # answered, not an unhandled error


def test_start_after_the_attempts_are_used_up_connects_again(
        brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, b = brokers
    wait_until(lambda: row(a, "GIVEUP")["state"] == "failed", "GIVEUP gave up", timeout=30,
               detail=lambda: repr(row(a, "GIVEUP")))
    wait_until(lambda: mirror(a, "GIVEUP")["state"] == "failed", "its mirror failed", timeout=10,
               detail=lambda: repr(mirror(a, "GIVEUP")))
    assert "attempt" in mirror(a, "GIVEUP")["last_error"]
    b.start()
    status, body = post(a, "broker-connections/GIVEUP/start")
    assert status == 200, body
    wait_until(lambda: mirror(a, "GIVEUP")["state"] == "connected", "GIVEUP connected again",
               timeout=30, detail=lambda: repr(row(a, "GIVEUP")))
    assert mirror(a, "GIVEUP")["last_error"] is None
    assert row(a, "GIVEUP")["up"] is True


def cli(a: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RELAYMQ, "mirror", *args, "--url", f"http://127.0.0.1:{a.http_port}"],
                          capture_output=True, text=True, timeout=120)


def test_the_mirror_commands_show_and_drive_the_mirrors(
        brokers: tuple[BrokerProcess, BrokerProcess]) -> None:
    a, b = brokers
    if not b.alive():  # GIVEUP's target, started by the test before when it ran
        b.start()
        post(a, "broker-connections/GIVEUP/start")
    wait_until(lambda: mirror(a, "GIVEUP")["state"] == "connected", "GIVEUP connected",
               timeout=30, detail=lambda: repr(row(a, "GIVEUP")))
    listed = cli(a, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:4] == ["name", "state", "target", "snf_depth"], lines
    by_name = {line.split()[0]: line for line in lines[1:]}
    assert set(by_name) == {"NOWHERE", "SELF", "GIVEUP"}, lines
    assert "target unreachable (retrying)" in by_name["NOWHERE"]
    assert "refused by the target" in by_name["SELF"]
    rows = {r["name"]: r for r in json.loads(cli(a, "list", "--json").stdout)}
    assert rows["GIVEUP"]["state"] == "connected"
    assert rows["GIVEUP"]["target"] == f"tcp://127.0.0.1:{b.port}", rows["GIVEUP"]
    assert rows["GIVEUP"]["snf_depth"] == 0 and rows["GIVEUP"]["connected"] is True
    assert "refused" in rows["NOWHERE"]["last_error"].lower()
    status = cli(a, "status", "GIVEUP")
    assert "state: connected" in status.stdout.splitlines(), status.stdout

    stopped = cli(a, "stop", "GIVEUP")
    assert stopped.returncode == 0 and stopped.stdout.strip() == "GIVEUP: stopped", stopped
    assert mirror(a, "GIVEUP")["state"] == "stopped"
    failed = cli(a, "sync", "GIVEUP")  # a stopped mirror cannot copy anything
    assert failed.returncode == 1 and "not connected to its target" in failed.stderr, failed
    started = cli(a, "start", "GIVEUP")
    assert started.returncode == 0, started.stderr
    wait_until(lambda: mirror(a, "GIVEUP")["state"] == "connected", "GIVEUP connected again",
               timeout=30, detail=lambda: repr(row(a, "GIVEUP")))
    synced = cli(a, "sync", "GIVEUP")
    assert synced.returncode == 0, synced.stderr
    assert synced.stdout.startswith("GIVEUP: ") and "sent to" in synced.stdout, synced.stdout

    unknown = cli(a, "status", "NOPE")
    assert unknown.returncode == 1 and "no mirror named 'NOPE'" in unknown.stderr, unknown
    down = subprocess.run([RELAYMQ, "mirror", "list", "--url", "http://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60)
    assert down.returncode == 1 and "cannot reach the console" in down.stderr, down


def test_the_console_knows_every_broker_connection_from_its_first_answer(tmp_path: Path) -> None:
    """The console answers only once every configured broker connection is
    registered: its first listing names them all, and a start or status request
    right after start-up finds its connection (it was a 404 while the broker was
    still starting the ones before it)."""
    names = [f"C{i}" for i in range(30)]
    a = BrokerProcess(tmp_path, "first-answer", console=True)
    a.mirrors = ("<broker-connections>"
                 + "".join(connection_xml(name, free_port()) for name in names)
                 + "</broker-connections>")
    a.start(wait=False)
    try:
        def first_listing() -> tuple[list[str]] | None:
            try:  # a tuple: an empty listing is an answer too
                return ([r["name"] for r in a.api("broker-connections")["items"]],)
            except (OSError, urllib.error.URLError):
                return None  # not listening yet

        answer = wait_until(first_listing, "the console's first answer", timeout=60, interval=0.002)
        assert answer is not None and sorted(answer[0]) == sorted(names), answer
    finally:
        a.stop()
