"""Recovery from damage: torn tails, corrupt files, lost or damaged index, missing files."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
from relaymq.spi.persistence import (
    AddDestination,
    AddSubscription,
    RemoveMessage,
    RemoveMessages,
    SubscriptionRecord,
)
from relaymq_kahadb import KahaDBPersistenceAdapter
from relaymq_kahadb.errors import MissingJournalFiles
from relaymq_kahadb.journal.records import OP_NAMES, RT_BATCH, parse_batch, scan

from .conftest import Opener, adds, config, content, data_files

A = "queue://A"


def flip(path: Path, offset: int, n: int = 4) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        data = fh.read(n)
        fh.seek(offset)
        fh.write(bytes(b ^ 0xFF for b in data))


async def fill(store: KahaDBPersistenceAdapter, n: int, size: int = 1000) -> None:
    await store.write([AddDestination(A)])
    for s in range(1, n + 1):
        await store.write(adds(A, [s], size))


async def seqs(store: KahaDBPersistenceAdapter, key: str = A) -> list[int]:
    return [m.seq for m in await store.read(key)]


# ---------------------------------------------------------------------------
# torn tails
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("prealloc", ["sparse_file", "zeros", "none"])
async def test_garbage_after_the_last_record_is_cut(open_store: Opener, tmp_path: Path,
                                                    prealloc: str, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "kahadb"
    store = await open_store(preallocation_strategy=prealloc)
    await fill(store, 20)
    end = store._tail_off
    last = data_files(d)[-1]
    await store.stop()
    with open(last, "r+b") as fh:  # a write interrupted half way, after the checkpoint
        fh.seek(end)
        fh.write(b"\xe4\x1b\x01\x00\x00\x04\x00garbage-of-a-torn-write" * 3)
    caplog.set_level(logging.WARNING, "relaymq.kahadb")
    store = await open_store(preallocation_strategy=prealloc)
    assert await seqs(store) == list(range(1, 21))
    assert "torn tail" in caplog.text and "cutting the file" in caplog.text
    rec = store.recovery
    assert rec is not None and rec.report.truncated and not rec.report.quarantined
    await store.write(adds(A, [21]))  # appends continue where the good data ended
    await store.stop()
    store = await open_store(preallocation_strategy=prealloc)
    assert await seqs(store) == list(range(1, 22))
    assert not store.recovery.report.truncated  # type: ignore[union-attr]


async def test_half_written_last_record_without_checkpoint(open_store: Opener, tmp_path: Path) -> None:
    d = tmp_path / "kahadb"
    store = await open_store()
    await fill(store, 30)
    last_off = store._last_record[1]  # type: ignore[index]
    last = data_files(d)[-1]
    await store.stop()
    (d / "index.ckpt").unlink()  # a crash before any checkpoint: everything is replayed
    os.truncate(last, last_off + 40)  # the last record lost its end
    store = await open_store()
    assert await seqs(store) == list(range(1, 30))
    assert store.recovery.report.rebuilt  # type: ignore[union-attr]
    assert (await store.stats(A)).last_seq == 29


# ---------------------------------------------------------------------------
# corrupt files
# ---------------------------------------------------------------------------


async def test_corrupt_middle_file_is_quarantined_and_salvaged(
        open_store: Opener, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "kahadb"
    store = await open_store()
    await fill(store, 200)
    f, off, _ln = store.index.location(A, 100)  # type: ignore[misc]
    victim = d / f"db-{f}.log"
    assert victim != data_files(d)[-1]
    in_victim = [s for s in range(1, 201) if store.index.location(A, s)[0] == f]  # type: ignore[index]
    await store.stop()
    flip(victim, off + 20)
    caplog.set_level(logging.INFO, "relaymq.kahadb")
    store = await open_store(check_for_corrupt_journal_files=True)
    got = await seqs(store)
    assert got == [s for s in range(1, 201) if s != 100]  # only the damaged message is lost
    assert (d / "quarantine" / victim.name).exists()  # moved aside, never deleted
    assert not victim.exists()
    assert "lost 1 stored message(s): queue://A seq 100" in caplog.text
    assert "salvaged" in caplog.text
    assert all(store.index.location(A, s)[0] != f for s in in_victim if s != 100)  # type: ignore[index]
    await store.stop()
    store = await open_store()  # and it stays that way
    assert await seqs(store) == got


async def test_corrupt_message_found_on_read(open_store: Opener, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "kahadb"
    store = await open_store()
    await fill(store, 50)
    f, off, _ln = store.index.location(A, 7)  # type: ignore[misc]
    await store.stop()
    flip(d / f"db-{f}.log", off + 30)
    store = await open_store()  # the checkpoint covers it: not scanned at start-up
    caplog.set_level(logging.ERROR, "relaymq.kahadb")
    assert await seqs(store) == [s for s in range(1, 51) if s != 7]
    assert "queue://A seq 7" in caplog.text and "unreadable" in caplog.text
    assert (await store.stats(A)).count == 49
    await store.stop()
    store = await open_store()  # the loss was journaled: not reported again
    assert await seqs(store) == [s for s in range(1, 51) if s != 7]


async def test_damage_in_the_replayed_journal(open_store: Opener, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "kahadb"
    store = await open_store()
    await fill(store, 200)
    f, off, _ln = store.index.location(A, 70)  # type: ignore[misc]
    assert store.index.location(A, 71)[0] == f  # type: ignore[index]  # not the file's last record
    await store.stop()
    (d / "index.ckpt").unlink()
    flip(d / f"db-{f}.log", off + 5)
    caplog.set_level(logging.ERROR, "relaymq.kahadb")
    store = await open_store()
    got = await seqs(store)
    assert 70 not in got and len(got) == 199
    assert "damaged span" in caplog.text
    assert (d / "quarantine" / f"db-{f}.log").exists()


@pytest.mark.parametrize("where", ["body", "boundary"])
async def test_damaged_batch_record_loses_only_the_damaged_messages(
        open_store: Opener, tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str) -> None:
    """A loop turn's sends are one record; damage in it after the last checkpoint
    costs the messages whose bytes were hit, named in the log, not the whole batch."""
    d = tmp_path / "kahadb"
    store = await open_store()
    await store.write([AddDestination(A)])
    for first in range(1, 301, 50):  # six records of 50 messages, ~3 per data file
        await store.write(adds(A, range(first, first + 50), 400))
    f, off, ln = store.index.location(A, 75)  # type: ignore[misc]
    victim = d / f"db-{f}.log"
    assert victim != data_files(d)[-1]
    await store.stop()
    (d / "index.ckpt").unlink()  # as after a crash before any checkpoint
    if where == "body":
        flip(victim, off + 100, 50)
    else:  # the end of seq 75 and the operation header of seq 76
        flip(victim, off + ln - 10, 40)
    caplog.set_level(logging.ERROR, "relaymq.kahadb")
    store = await open_store()
    lost = {75} if where == "body" else {75, 76}
    assert await seqs(store) == [s for s in range(1, 301) if s not in lost]
    assert (d / "quarantine" / victim.name).exists()
    assert "lost 1 stored message(s): queue://A seq 75" in caplog.text
    if where == "boundary":
        assert "sequences missing around the unreadable bytes" in caplog.text
        assert "queue://A seq 76" in caplog.text
    await store.stop()
    store = await open_store()  # the kept messages were copied out of the quarantined file
    assert len(await seqs(store)) == 300 - len(lost)


async def test_bad_file_header_in_the_middle(open_store: Opener, tmp_path: Path) -> None:
    d = tmp_path / "kahadb"
    store = await open_store()
    await fill(store, 200)
    await store.stop()
    second = data_files(d)[1]
    flip(second, 0, 8)
    (d / "index.ckpt").unlink()
    store = await open_store()
    assert await seqs(store) == list(range(1, 201))  # records validate on their own
    assert (d / "quarantine" / second.name).exists()


# ---------------------------------------------------------------------------
# the index
# ---------------------------------------------------------------------------


async def workload(store: KahaDBPersistenceAdapter) -> None:
    sub = SubscriptionRecord("c", "s", "topic://T", selector="x > 1")
    await store.write([AddDestination(A), AddDestination("queue://B"), AddSubscription(sub)])
    for s in range(1, 301):
        ops = adds(A, [s], 500)
        if s % 3 == 0:
            ops += adds(sub.key, [s], 300)
        if s > 20:
            ops.append(RemoveMessage(A, s - 20))
        await store.write(ops)
        if s % 50 == 0:
            await store.cleaner.run()
    await store.write([RemoveMessage(sub.key, s) for s in range(3, 150, 3)])


@pytest.mark.parametrize("damage", ["deleted", "garbage", "truncated", "forced"])
async def test_index_rebuilt_from_the_journal(open_store: Opener, tmp_path: Path, damage: str,
                                              caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "kahadb"
    store = await open_store()
    await workload(store)
    before = await content(store)
    await store.stop()
    ckpt = d / "index.ckpt"
    if damage == "deleted":
        ckpt.unlink()
    elif damage == "garbage":
        flip(ckpt, ckpt.stat().st_size // 2)
    elif damage == "truncated":
        os.truncate(ckpt, ckpt.stat().st_size // 3)
    caplog.set_level(logging.WARNING, "relaymq.kahadb")
    store = await open_store(force_recover_index=damage == "forced")
    assert store.recovery.report.rebuilt  # type: ignore[union-attr]
    assert "rebuilding the index" in caplog.text
    assert await content(store) == before


async def test_subscriptions_and_sequences_survive_a_rebuild_after_cleanup(
        open_store: Opener, tmp_path: Path) -> None:
    """The records that created them live in files the cleaner has deleted."""
    d = tmp_path / "kahadb"
    store = await open_store()
    sub = SubscriptionRecord("client", "durable", "topic://T", selector="a = 1", extra={"k": 1})
    await store.write([AddDestination(A), AddSubscription(sub)])
    for s in range(1, 400):
        await store.write([*adds(A, [s], 1000), RemoveMessage(A, s)])
    await store.cleaner.run()
    assert "db-1.log" not in {p.name for p in data_files(d)}
    await store.stop()
    (d / "index.ckpt").unlink()
    store = await open_store()
    assert await store.subscriptions() == [sub]
    assert await store.destinations() == [A]
    assert (await store.stats(A)).last_seq == 399
    assert await store.read(A) == []


def journal_ops(directory: Path) -> set[str]:
    """The names of the operations in the journal's batch records."""
    names: set[str] = set()
    for path in data_files(directory):
        fid = int(path.stem.split("-")[1])
        for _off, rtype, payload in scan(path.read_bytes(), fid):
            if rtype == RT_BATCH:
                names.update(OP_NAMES[op[0]] for op in parse_batch(payload))
    return names


@pytest.mark.parametrize("style", ["per-message", "runs", "mixed"])
async def test_acks_are_recovered_from_either_removal_record(open_store: Opener, tmp_path: Path,
                                                             style: str) -> None:
    """Acks are journaled as one REMOVE per message (every journal written before
    REMOVE_RUN existed, and still transactions, the cleaner and single acks) or as
    REMOVE_RUN ops (a turn's acks of a destination). An index rebuilt from a journal
    of either kind, or of both, equals the live one: the same messages, the same
    per-file accounting and the same ack references between files."""
    d = tmp_path / "kahadb"
    store = await open_store()
    b = "queue://B"
    await store.write([AddDestination(A), AddDestination(b)])
    for s in range(1, 301):  # about 60 messages per data file
        await store.write([*adds(A, [s], 1000), *adds(b, [s], 100)])
    acked = [*range(1, 120, 2), *range(250, 200, -3), 299, 4, 300, 5000]  # unknown: 5000
    for i in range(0, len(acked), 7):
        chunk = acked[i:i + 7]
        runs = style == "runs" or (style == "mixed" and i % 2 == 0)
        if runs:
            await store.write([RemoveMessages(A, tuple(chunk)), RemoveMessages(b, tuple(chunk[:2]))])
        else:
            await store.write([*(RemoveMessage(A, s) for s in chunk),
                               *(RemoveMessage(b, s) for s in chunk[:2])])
    idx = store.index
    live = (dict(idx.file_keys), dict(idx.file_bytes), dict(idx.ack_refs))
    assert idx.ack_refs, "acks of messages in older files should pin them"
    before = await content(store)
    assert [e[0] for e in before[A][0]] == sorted(set(range(1, 301)) - set(acked))
    await store.stop()
    names = journal_ops(d)
    assert ("remove" in names) == (style != "runs")
    assert ("remove-run" in names) == (style != "per-message")
    (d / "index.ckpt").unlink()
    store = await open_store()
    assert store.recovery.report.rebuilt  # type: ignore[union-attr]
    idx = store.index
    assert (dict(idx.file_keys), dict(idx.file_bytes), dict(idx.ack_refs)) == live
    assert await content(store) == before


async def test_missing_data_file_stops_start_up(open_store: Opener, tmp_path: Path) -> None:
    d = tmp_path / "kahadb"
    store = await open_store()
    await fill(store, 200)
    await store.stop()
    gone = data_files(d)[1]
    gone.unlink()
    with pytest.raises(MissingJournalFiles, match=rf"{gone.name}.*queue://A.*ignoreMissingJournalfiles"):
        await open_store()
    store = await open_store(ignore_missing_journalfiles=True)
    got = await seqs(store)
    assert 0 < len(got) < 200 and got[0] == 1 and got[-1] == 200


async def test_checkpoint_ahead_of_the_journal_is_not_trusted(open_store: Opener, tmp_path: Path) -> None:
    """E.g. a restored backup of the data files older than the index."""
    d = tmp_path / "kahadb"
    store = await open_store()
    await fill(store, 10)
    await store.stop()
    backup = tmp_path / "backup"
    shutil.copytree(d, backup)
    store = await open_store()
    await store.write(adds(A, range(11, 21)))
    await store.stop()
    for p in data_files(d):
        shutil.copy(backup / p.name, p) if (backup / p.name).exists() else p.unlink()
    store = await open_store()
    assert store.recovery.report.rebuilt  # type: ignore[union-attr]
    assert await seqs(store) == list(range(1, 11))


async def test_crash_images_recover_to_what_was_acknowledged(open_store: Opener, tmp_path: Path) -> None:
    """Copies of the directory taken while a store runs (with cleanup and compaction)
    are what a crash leaves behind; each must open to exactly the acknowledged state."""
    d = tmp_path / "kahadb"
    store = await open_store(compaction_threshold=0.9)
    sub = SubscriptionRecord("c", "s", "topic://T")
    await store.write([AddDestination(A), AddSubscription(sub)])
    images = []
    for s in range(1, 601):
        ops = adds(A, [s], 700)
        if s % 7 == 0:
            ops += adds(sub.key, [s], 200)
        if s > 30 and s % 11:
            ops.append(RemoveMessage(A, s - 30))
        await store.write(ops)
        if s % 97 == 0:
            await store.cleaner.run()
        if s % 150 == 0:
            await store.flush()
            image = tmp_path / f"image-{s}"
            shutil.copytree(d, image, ignore=shutil.ignore_patterns("lock"))
            images.append((image, await content(store)))
    for image, expected in images:
        s = KahaDBPersistenceAdapter(config(image))
        await s.start()
        try:
            assert await content(s) == expected, image.name
        finally:
            await s.stop()
        (image / "index.ckpt").unlink()
        s = KahaDBPersistenceAdapter(config(image))
        await s.start()
        try:
            assert await content(s) == expected, f"{image.name} rebuilt"
        finally:
            await s.stop()


@pytest.mark.slow  # a long run or a restart: compiled build only (docs/testing.md)
async def test_long_rebuilds_report_progress(open_store: Opener, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    from relaymq_kahadb import recovery

    d = tmp_path / "kahadb"
    store = await open_store(journal_max_file_length=256 << 10)
    await store.write([AddDestination(A)])
    for s in range(1, 5001):
        await store.write(adds(A, [s], 50))
    await store.stop()
    (d / "index.ckpt").unlink()
    monkeypatch.setattr(recovery, "_PROGRESS_EVERY", 0.0)
    caplog.set_level(logging.INFO, "relaymq.kahadb")
    store = await open_store(journal_max_file_length=256 << 10)
    assert (await store.stats(A)).count == 5000
    assert "KahaDB recovery: db-" in caplog.text and "records replayed" in caplog.text
