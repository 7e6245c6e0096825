"""Queue types from an installed third-party distribution, chosen by policy and by
declaration, in a real `relaymq run` process reached with a real STOMP client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from relaymq.testing import free_port, wait_until

from .conftest import install, run_python

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


@pytest.fixture(scope="module")
def queues_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory.mktemp("queues-site"), "queue_type_plugin")


def write_config(tmp: Path, port: int, queue_type: str = "latestByKey") -> Path:
    cfg = tmp / "activemq.xml"
    cfg.write_text(f"""<broker brokerName="types" persistent="false">
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue="PRICES.>" queueType="{queue_type}"/>
  </policyEntries></policyMap></destinationPolicy>
  <destinations><queue physicalName="LATEST" queueType="latestByKey"/></destinations>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
  </transportConnectors>
</broker>""")
    return cfg


def env_with(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


def received(port: int, destination: str, sentinel: str) -> list[tuple[str, str | None]]:
    """Everything a new subscriber to `destination` gets, up to the sentinel body."""
    got: list[tuple[str, str | None]] = []
    done = threading.Event()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame):  # type: ignore[no-untyped-def]
            got.append((frame.body, frame.headers.get("_AMQ_LVQ_NAME")))
            if frame.body == sentinel:
                done.set()

    conn = stomp.Connection([("127.0.0.1", port)])
    conn.set_listener("", Listener())
    conn.connect(wait=True)
    conn.subscribe(destination, id=1, ack="auto")
    wait_until(done.is_set, what=f"the sentinel on {destination}")
    conn.disconnect()
    return got


def test_a_queue_type_chosen_by_policy_and_by_declaration(queues_site: Path, tmp_path: Path) -> None:
    port = free_port()
    cfg = write_config(tmp_path, port)
    proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], env=env_with(queues_site),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def listening() -> bool:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return True
            except OSError:
                return False

        wait_until(listening, what="the broker to listen")
        conn = stomp.Connection([("127.0.0.1", port)])
        conn.connect(wait=True)
        for dest in ("/queue/PRICES.NYSE", "/queue/LATEST", "/queue/PLAIN"):
            for key, value in (("IBM", "1"), ("MSFT", "7"), ("IBM", "2"), ("IBM", "3")):
                conn.send(dest, f"{key}={value}", headers={"_AMQ_LVQ_NAME": key},
                          receipt=f"{dest}-{key}-{value}")
            conn.send(dest, "end", receipt=f"{dest}-end")
        conn.disconnect(receipt="bye")

        # the policy's queue type and the declared one keep the last value per key
        assert received(port, "/queue/PRICES.NYSE", "end") == [
            ("MSFT=7", "MSFT"), ("IBM=3", "IBM"), ("end", None)]
        assert received(port, "/queue/LATEST", "end") == [
            ("MSFT=7", "MSFT"), ("IBM=3", "IBM"), ("end", None)]
        # a queue no policy names is a standard queue
        assert [b for b, _ in received(port, "/queue/PLAIN", "end")] == [
            "IBM=1", "MSFT=7", "IBM=2", "IBM=3", "end"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)


def test_an_unknown_queue_type_is_a_config_error_naming_the_installed_ones(
        queues_site: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), queue_type="latestbykey")
    check = run_python(queues_site, "relaymq.cli", "config", "check", str(cfg), module=True)
    assert check.returncode == 1
    assert f'queueType="latestbykey" at {cfg}:3 needs a queue type named \'latestbykey\'' in check.stderr
    assert "installed: anonymous, lastValue, latestByKey, partitioned, solace, standard" in check.stderr
    assert "did you mean latestByKey?" in check.stderr
    run = subprocess.run([RELAYMQ, "run", "--config", str(cfg)], env=env_with(queues_site),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "installed: anonymous, lastValue, latestByKey, partitioned, solace, standard" in run.stderr + run.stdout
