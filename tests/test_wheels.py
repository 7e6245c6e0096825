"""The distributions as users install them: compiled platform wheels in a clean
virtual environment run the compiled modules, find their plugins through entry
points, and serve a STOMP client."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
CONTAINERFILE = ROOT / "packaging" / "Containerfile"


def _container_packages() -> list[str]:
    """The distributions packaging/Containerfile installs (its `pip install` line)."""
    text = CONTAINERFILE.read_text().replace("\\\n", " ")
    line = next(ln for ln in text.splitlines() if "pip install" in ln and "--find-links" in ln)
    words = line.split("--find-links", 1)[1].split("&&")[0].split()[1:]
    return [w for w in words if w.startswith("relaymq")]


CONTAINER_PACKAGES = _container_packages()
PACKAGE_DIRS = ["core", *(f"plugins/{p.removeprefix('relaymq-').replace('-', '_')}"
                          for p in CONTAINER_PACKAGES if p != "relaymq")]


def _uv() -> list[str]:
    for found in (shutil.which("uv"), ROOT / ".tools" / "bin" / "uv"):
        if found and Path(found).exists():
            return [str(found)]
    return [sys.executable, "-m", "uv"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run([sys.executable, str(ROOT / "tools" / "build_wheels.py"), "--out",
                            str(out), *PACKAGE_DIRS], capture_output=True, text=True, timeout=1200)
    assert build.returncode == 0, build.stderr
    compiled = sorted(w.name.split("-")[0] for w in out.glob("*-cp*-*.whl"))
    assert compiled == ["relaymq", "relaymq_amqp", "relaymq_kahadb", "relaymq_stomp",
                        "relaymq_virtual_topic"], build.stdout + build.stderr
    assert len(list(out.glob("*-py3-none-any.whl"))) == len(PACKAGE_DIRS)
    assert len(list(out.glob("*.tar.gz"))) == len(PACKAGE_DIRS)
    # what packaging/Containerfile does: a venv, then pip install the names from dist/
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([*_uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run([*_uv(), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                    "--find-links", str(out), *CONTAINER_PACKAGES], check=True, timeout=600)
    return venv


def test_the_installed_wheels_run_compiled(installed) -> None:
    done = subprocess.run([str(installed / "bin" / "relaymq"), "plugins", "list"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    build = next(ln for ln in done.stdout.splitlines() if ln.startswith("build: "))
    for package in ("relaymq", "relaymq_amqp", "relaymq_stomp", "relaymq_kahadb",
                    "relaymq_virtual_topic"):
        assert f"{package}: compiled (" in build, build
    assert "transports: stomp [enabled]" in done.stdout
    assert "persistence: kahaDB [enabled]" in done.stdout


def test_the_installed_kernel_is_a_typed_package(installed) -> None:
    """py.typed ships: a plugin's type checks (and its mypyc build) see the kernel's types."""
    done = subprocess.run([str(installed / "bin" / "python"), "-c",
                           "import pathlib, relaymq; "
                           "print((pathlib.Path(relaymq.__file__).parent / 'py.typed').is_file())"],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stdout + done.stderr


def test_a_broker_from_the_wheels_serves_a_stomp_round_trip(installed, tmp_path) -> None:
    port = _free_port()
    cfg = tmp_path / "activemq.xml"
    cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" dataDirectory="{tmp_path}">
  <persistenceAdapter><kahaDB directory="{tmp_path}/kahadb"/></persistenceAdapter>
  <transportConnectors><transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/></transportConnectors>
</broker>""")
    proc = subprocess.Popen([str(installed / "bin" / "relaymq"), "run", "-c", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() >= deadline:  # a bounded wait
                    raise AssertionError(proc.stdout.read() if proc.stdout else "") from None
                time.sleep(0.05)
        got: list[str] = []

        class Listener(stomp.ConnectionListener):
            def on_message(self, frame) -> None:
                got.append(frame.body)

        conn = stomp.Connection([("127.0.0.1", port)])
        conn.set_listener("", Listener())
        conn.connect(wait=True)
        conn.subscribe("/queue/wheel", id="1", ack="auto")
        conn.send("/queue/wheel", "from a wheel", headers={"persistent": "true", "receipt": "r1"})
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
        conn.disconnect()
        assert got == ["from a wheel"]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "relaymq: compiled (" in out and "relaymq_stomp: compiled (" in out, out


def test_config_init_from_the_wheels_loads(installed, tmp_path) -> None:
    path = tmp_path / "activemq.xml"
    bin_ = installed / "bin" / "relaymq"
    assert subprocess.run([str(bin_), "config", "init", str(path)], timeout=60).returncode == 0
    done = subprocess.run([str(bin_), "config", "check", str(path), "-D",
                           f"activemq.data={tmp_path}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "transports: amqp amqp://127.0.0.1:5672" in done.stdout


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_the_systemd_unit_verifies(installed, tmp_path) -> None:
    unit = (ROOT / "packaging" / "relaymq.service").read_text()
    assert "/opt/relaymq/bin/relaymq run --config /etc/relaymq/activemq.xml" in unit
    local = tmp_path / "relaymq.service"
    local.write_text(unit.replace("/opt/relaymq/bin/relaymq", str(installed / "bin" / "relaymq")))
    done = subprocess.run(["systemd-analyze", "verify", str(local)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Unknown key" not in done.stderr and "Unknown section" not in done.stderr, done.stderr
