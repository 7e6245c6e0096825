"""A checkpoint's snapshot is taken on the event loop and serialised later, by the
thread that writes it: what it writes must be the index as it was when taken,
whatever the store did in between."""

from __future__ import annotations

from pathlib import Path

from relaymq.spi.persistence import (
    AddDestination,
    AddDuplicateId,
    RemoveDuplicateId,
    RemoveMessages,
)
from relaymq_kahadb import checkpoint as ckpt

from .conftest import Opener, adds

A = "queue://A"
B = "queue://B"


def dup(n: int) -> bytes:
    return f"s:spark:query:7:{n % 2}:{n}".encode()


async def test_a_checkpoint_holds_the_index_as_it_was_when_the_snapshot_was_taken(
        open_store: Opener) -> None:
    store = await open_store()
    await store.write([AddDestination(A), AddDestination(B)])
    await store.write(adds(A, range(1, 51)))
    # more ids than one serialisation slice, on two addresses
    await store.write([AddDuplicateId(A, n, dup(n)) for n in range(1, 4501)])
    await store.write([AddDuplicateId(B, 1, b"only")])
    index = store.index
    snap = ckpt.snapshot(index, (1, 0), dict(store.files), None)
    taken = {
        "dup_ids": {a: dict(ids) for a, ids in index.dup_ids.items() if ids},
        "last_seq": dict(index.last_seq),
        "file_keys": {f: dict(fk) for f, fk in index.file_keys.items() if fk},
        "subs": dict(index.subs),
    }

    # the store goes on: new ids, ids dropped, messages added and removed
    await store.write([AddDuplicateId(A, 4501, dup(4501)), RemoveDuplicateId(A, 1),
                       RemoveDuplicateId(B, 1)])
    await store.write(adds(A, range(51, 61)) + adds(B, range(1, 6)))
    await store.write([RemoveMessages(A, (1, 2, 3))])
    assert index.dup_ids != taken["dup_ids"]  # the test changes what it checks
    assert index.last_seq != taken["last_seq"]
    assert {f: dict(fk) for f, fk in index.file_keys.items() if fk} != taken["file_keys"]

    directory = store.index_dir
    ckpt.write(directory, snap)
    loaded = ckpt.load(directory)
    assert loaded is not None
    got = loaded.index
    assert got.dup_ids == taken["dup_ids"]
    assert len(got.dup_ids[A]) == 4500 and got.dup_ids[B] == {1: b"only"}
    assert got.last_seq == taken["last_seq"]
    assert {f: fk for f, fk in got.file_keys.items() if fk} == taken["file_keys"]
    assert got.subs == taken["subs"]
    assert len(got.keys[A].seqs) - got.keys[A].head == 50


async def test_a_store_reopened_from_its_checkpoint_keeps_its_duplicate_ids(
        open_store: Opener, tmp_path: Path) -> None:
    directory = tmp_path / "ids"
    store = await open_store(directory)
    await store.write([AddDestination(A)])
    await store.write([AddDuplicateId(A, n, dup(n)) for n in range(1, 5001)])
    await store.write([RemoveDuplicateId(A, n) for n in range(1, 101)])
    await store.checkpoint(force=True)
    await store.stop()

    reopened = await open_store(directory)
    want = [(n, dup(n)) for n in range(101, 5001)]
    assert [(r.seq, r.dup_id) for r in await reopened.duplicate_ids() if r.address == A] == want
