"""Disk reclaim: dead files go, and a few old messages or acks do not pin many files."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaymq.spi.persistence import (
    AddDestination,
    AddDuplicateId,
    RemoveDestination,
    RemoveDuplicateId,
    RemoveMessage,
    RemoveMessages,
)
from relaymq.testing import wait_until_async
from relaymq_kahadb import KahaDBPersistenceAdapter

from .conftest import Opener, adds, config, content, data_files

F = "queue://fast"
S = "queue://slow"
FILE = 64 << 10


async def rebuilt_content(directory: Path) -> dict:  # type: ignore[type-arg]
    """What the store holds after an index rebuild from the remaining files alone."""
    (directory / "index.ckpt").unlink()
    s = KahaDBPersistenceAdapter(config(directory))
    await s.start()
    try:
        assert s.recovery is not None and s.recovery.report.rebuilt
        return await content(s)
    finally:
        await s.stop()


async def traffic(store: KahaDBPersistenceAdapter, first: int, n: int, size: int = 1000) -> int:
    """n messages through the fast queue, each consumed right away."""
    for s in range(first, first + n):
        await store.write(adds(F, [s], size))
        await store.write([RemoveMessage(F, s)])
    return first + n


@pytest.mark.slow  # a long run or a restart: compiled build only (docs/testing.md)
@pytest.mark.parametrize("compaction", [True, False])
async def test_long_run_with_a_few_stuck_messages(open_store: Opener, tmp_path: Path,
                                                  compaction: bool) -> None:
    """1 message in 400 is never consumed. With compaction the disk stays near the
    live data; without it (ActiveMQ's default behaviour for messages) every file
    holding a stuck message stays."""
    d = tmp_path / "kahadb"
    store = await open_store(journal_max_file_length=FILE, enable_ack_compaction=compaction,
                             compact_acks_after_no_gc=1, compaction_threshold=0.5)
    await store.write([AddDestination(F), AddDestination(S)])
    seq = 1
    stuck = 0
    for round_ in range(30):
        stuck += 1
        await store.write(adds(S, [stuck], 1000))
        seq = await traffic(store, seq, 400)
        if round_ % 3 == 2:
            await store.cleaner.run()
    relocated = []
    for _ in range(3):
        relocated += (await store.cleaner.run()).relocated_files
    assert bool(relocated) == compaction
    live = store.index.live_bytes()
    assert (await store.stats(S)).count == 30 and (await store.stats(F)).count == 0
    written = store.journal_stats()["bytes"]
    assert written > 60 * FILE  # the run wrote many files' worth
    if compaction:
        assert len(data_files(d)) <= 6
        assert store.size() < live + 6 * FILE
    else:
        assert len(data_files(d)) >= 25  # each stuck message pins its file
    expected = await content(store)
    await store.stop()
    assert await rebuilt_content(d) == expected


@pytest.mark.parametrize("runs", [False, True], ids=["per-message", "runs"])
async def test_ack_pins_are_forwarded(open_store: Opener, tmp_path: Path, runs: bool) -> None:
    """Each old file keeps a live message (no message compaction here) and had
    another one acknowledged much later: the files holding those acks must not
    be kept alive by them, and a rebuild must not bring the acked messages back.
    The acks are per-message REMOVE records or REMOVE_RUN ops (with an ack of a
    message that never existed in each run)."""
    d = tmp_path / "kahadb"
    store = await open_store(journal_max_file_length=FILE, compaction_threshold=0.0,
                             compact_acks_after_no_gc=1)
    await store.write([AddDestination(F), AddDestination(S)])
    seq = 1
    for k in range(1, 21):  # files with two slow messages each
        await store.write(adds(S, [2 * k - 1, 2 * k], 1000))
        seq = await traffic(store, seq, 70)
    pinned_by_files = []
    for k in range(1, 21):  # ack one of the two, each ack in a file of its own
        if runs:
            await store.write([RemoveMessages(S, (2 * k, 10_000 + k))])
        else:
            await store.write([RemoveMessage(S, 2 * k)])
        pinned_by_files.append(store.tail_file)
        seq = await traffic(store, seq, 70)
    await store.cleaner.run()
    pins = {f for f in pinned_by_files if store.cleaner._pinning(f)}
    assert pins, "the scenario should create ack pins"
    forwarded = []
    for _ in range(4):
        forwarded += (await store.cleaner.run()).forwarded_files
    assert pins <= set(forwarded)
    remaining = {f for f in pinned_by_files if f in store.files}
    assert len(remaining) <= 3  # only the files after the last checkpoint
    assert [m.seq for m in await store.read(S)] == list(range(1, 41, 2))
    expected = await content(store)
    await store.stop()
    assert await rebuilt_content(d) == expected


async def test_removed_destination_does_not_come_back(open_store: Opener, tmp_path: Path) -> None:
    """Its removal record may be in a file that is cleaned while files with its
    old messages remain; recreating it must not resurrect them after a rebuild."""
    d = tmp_path / "kahadb"
    store = await open_store(journal_max_file_length=FILE, compaction_threshold=0.0,
                             compact_acks_after_no_gc=1)
    gone = "queue://gone"
    await store.write([AddDestination(gone), AddDestination(S)])
    seq = 1
    for k in range(1, 6):
        await store.write(adds(gone, [k], 1000) + adds(S, [k], 1000))
        seq = await traffic(store, seq, 70)
    await store.write([RemoveDestination(gone)])
    seq = await traffic(store, seq, 200)
    await store.write([AddDestination(gone)])
    await store.write(adds(gone, [6]))
    for _ in range(4):
        await store.cleaner.run()
        seq = await traffic(store, seq, 100)
    assert [m.seq for m in await store.read(gone)] == [6]
    expected = await content(store)
    await store.stop()
    assert await rebuilt_content(d) == expected


async def test_duplicate_ids_outlive_the_files_they_were_written_in(
        open_store: Opener, tmp_path: Path) -> None:
    """Ids live in the index like subscriptions: the files that held their records
    are deleted (their messages were consumed), and the ids survive a checkpoint
    load and an index rebuild from the remaining files (the STATE record)."""
    d = tmp_path / "kahadb"
    store = await open_store(journal_max_file_length=FILE)
    await store.write([AddDestination(F), *adds(F, [1]), AddDuplicateId(F, 1, b"sfirst"),
                       AddDuplicateId(F, 2, b"b\x00\x01")])
    await store.write([RemoveMessage(F, 1), RemoveDuplicateId(F, 2), AddDuplicateId(F, 3, b"s3")])
    await traffic(store, 2, 300)
    first = data_files(d)[0]
    await store.cleaner.run()
    assert not first.exists()  # the file with the ids' records is gone
    want = [(1, b"sfirst"), (3, b"s3")]
    assert [(r.seq, r.dup_id) for r in await store.duplicate_ids()] == want
    await store.stop()
    store = await open_store()
    assert [(r.seq, r.dup_id) for r in await store.duplicate_ids()] == want
    await store.stop()
    (d / "index.ckpt").unlink()
    rebuilt = KahaDBPersistenceAdapter(config(d))
    await rebuilt.start()
    try:
        assert rebuilt.recovery is not None and rebuilt.recovery.report.rebuilt
        assert [(r.seq, r.dup_id) for r in await rebuilt.duplicate_ids()] == want
    finally:
        await rebuilt.stop()


async def test_archive_data_logs(open_store: Opener, tmp_path: Path) -> None:
    d = tmp_path / "kahadb"
    store = await open_store(journal_max_file_length=FILE, archive_data_logs=True)
    await store.write([AddDestination(F)])
    await traffic(store, 1, 300)
    res = await store.cleaner.run()
    assert res.deleted
    archived = sorted(p.name for p in (d / "archive").iterdir())
    assert archived == [f"db-{f}.log" for f in res.deleted]


async def test_cleanup_runs_on_its_own(open_store: Opener, tmp_path: Path) -> None:
    d = tmp_path / "kahadb"
    store = await open_store(journal_max_file_length=FILE, cleanup_interval=50,
                             checkpoint_interval=20)
    await store.write([AddDestination(F)])
    await traffic(store, 1, 300)
    await wait_until_async(lambda: len(data_files(d)) <= 2, "the cleaner to delete old files")
    assert (d / "index.ckpt").exists()
