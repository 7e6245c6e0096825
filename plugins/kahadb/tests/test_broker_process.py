"""kahaDB as an operator meets it: `relaymq run --config activemq.xml` processes,
STOMP clients, `relaymq kahadb inspect`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from relaymq_kahadb.cli import kahadb

from .brokers import BrokerProcess

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")


def test_a_second_broker_on_the_directory_fails_with_one_clear_line(tmp_path: Path) -> None:
    first = BrokerProcess(tmp_path, name="first").start()
    try:
        second = BrokerProcess(tmp_path, name="second").start(wait=False)
        assert second.proc is not None
        assert second.proc.wait(30) == 1
        out = second.output()
        assert f"is locked by another broker (pid={first.proc.pid} " in out  # type: ignore[union-attr]
        assert "failIfLocked" in out
        assert "Traceback" not in out
    finally:
        first.stop()


@pytest.mark.parametrize("layout", ["empty", "other files", "data directory"])
def test_inspect_refuses_a_directory_that_is_not_a_store(tmp_path: Path, layout: str) -> None:
    target = tmp_path / "x"
    target.mkdir()
    if layout == "other files":
        (target / "notes.txt").write_text("hello")
    if layout == "data directory":
        (target / "kahadb").mkdir()
        (target / "kahadb" / "db-1.log").write_bytes(b"\0" * 16)
    result = CliRunner().invoke(kahadb, ["inspect", str(target)])
    assert result.exit_code == 1
    assert f"{target} is not a KahaDB store directory" in result.output
    if layout == "data directory":
        assert f"did you mean {target / 'kahadb'}?" in result.output
