"""Where the console may listen: a non-local bind needs authentication."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import free_port

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


def run(tmp_path: Path, console: str) -> subprocess.CompletedProcess:
    cfg = tmp_path / "activemq.xml"
    cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
  <plugins>{console}</plugins>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{free_port()}"/>
  </transportConnectors>
</broker>""")
    return subprocess.run([RELAYMQ, "run", "-c", str(cfg)], capture_output=True, text=True,
                          timeout=60)


def test_a_non_local_console_without_authentication_does_not_start(tmp_path) -> None:
    done = run(tmp_path, f'<console host="0.0.0.0" port="{free_port()}"/>')
    assert done.returncode == 1
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("relaymq: ")]
    assert len(line) == 1, done.stderr
    assert "without authentication" in line[0] and "allowUnauthenticated" in line[0]


def test_a_port_in_use_is_one_line(tmp_path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(tmp_path, f'<console host="127.0.0.1" port="{port}"/>')
    assert done.returncode == 3, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
