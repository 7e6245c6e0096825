"""kahaDB as an operator meets it: `relaymq run --config activemq.xml` processes,
STOMP clients, `relaymq kahadb inspect`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from relaymq_kahadb.cli import kahadb

from .brokers import BrokerProcess, Stomp

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")


def test_a_second_broker_on_the_directory_fails_with_one_clear_line(tmp_path: Path) -> None:
    first = BrokerProcess(tmp_path, name="first").start()
    try:
        second = BrokerProcess(tmp_path, name="second").start(wait=False)
        assert second.proc is not None
        assert second.proc.wait(30) == 4  # a locked store (docs/operations.md)
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


def test_corrupt_middle_file_after_kill_9_is_quarantined_and_the_loss_named(tmp_path: Path) -> None:
    """Pipelined persistent sends (one journal record per loop turn), kill -9 before
    any checkpoint, 300 damaged bytes in a message in the middle of db-2.log: the broker starts,
    db-2.log is in quarantine/, and only the messages whose bytes were hit are
    missing, each named in the log."""
    broker = BrokerProcess(tmp_path, 'journalMaxFileLength="64kb" checkpointInterval="600000"')
    broker.start()
    client = Stomp(broker.port)
    for i in range(400):
        client.frame("SEND", {"destination": "/queue/C", "persistent": "true", "receipt": str(i)},
                     f"c{i:04d}".ljust(400, ".").encode())
    receipts = {client.read()[1].get("receipt-id") for _ in range(400)}
    assert len(receipts) == 400
    client.close()
    broker.kill()
    victim = tmp_path / "kahadb" / "db-2.log"
    assert (tmp_path / "kahadb" / "db-3.log").exists()  # db-2.log is in the middle
    # Aim at a message's bytes: a file ends where the next batch no longer fit, and
    # under load (bigger batches) that unused tail can start before mid-file.
    bodies = [m.start() for m in re.finditer(rb"c\d{4}\.{20}", victim.read_bytes())]
    assert bodies, "db-2.log holds no message"
    with open(victim, "r+b") as fh:
        fh.seek(bodies[len(bodies) // 2] + 50)
        fh.write(b"\xff" * 300)
    broker.start()
    try:
        client = Stomp(broker.port)
        got = [int(b[1:5]) for b in client.receive_all("/queue/C")]
        client.close()
    finally:
        broker.stop()
    assert (tmp_path / "kahadb" / "quarantine" / "db-2.log").exists()
    assert got == sorted(got)
    assert len(got) == len(set(got)), "a message was delivered twice"  # nothing was consumed before
    missing = sorted(set(range(400)) - set(got))
    assert 0 < len(missing) <= 3, missing  # not the whole batch record
    log = broker.output()
    assert "db-2.log: damaged span" in log and "moved the file to" in log
    for i in missing:  # sequence i + 1: named as lost, or as missing around unreadable bytes
        assert f"queue://C seq {i + 1}" in log or f"-{i + 1}" in log, (i, log)


def store_limited(tmp_path: Path, fail: bool) -> BrokerProcess:
    usage = (f'<systemUsage><systemUsage sendFailIfNoSpace="{str(fail).lower()}">'
             '<storeUsage><storeUsage limit="100 kb"/></storeUsage></systemUsage></systemUsage>')
    return BrokerProcess(tmp_path, 'journalMaxFileLength="64kb"', extra=usage).start()


def test_store_full_refuses_producers_and_names_the_destinations(tmp_path: Path) -> None:
    broker = store_limited(tmp_path, fail=True)
    try:
        client = Stomp(broker.port)
        for _ in range(300):
            cmd, headers, _body = client.send("/queue/FULL", b"x" * 1000)
            if cmd != "RECEIPT":
                break
        assert cmd == "ERROR"
        assert "sendFailIfNoSpace" in headers["message"]
    finally:
        broker.stop()
    log = broker.output()
    assert "persistent sends are refused" in log
    assert "largest: queue://FULL" in log


def test_store_full_blocks_producers_until_space_is_freed(tmp_path: Path) -> None:
    broker = store_limited(tmp_path, fail=False)
    try:
        producer = Stomp(broker.port)
        sent = 0
        producer.sock.settimeout(2)
        with pytest.raises(TimeoutError):  # the producer is held back, not refused
            for sent in range(300):  # noqa: B007
                assert producer.send("/queue/FULL", b"x" * 1000)[0] == "RECEIPT"
        consumer = Stomp(broker.port)
        assert len(consumer.receive_all("/queue/FULL")) >= sent
        producer.sock.settimeout(30)
        assert producer.read()[0] == "RECEIPT"  # the held send went through
    finally:
        broker.stop()
    assert "producers wait" in broker.output() and "largest: queue://FULL" in broker.output()
