"""The journal reader's decoding of every record kind kahaDB writes, without a
Spark session: a store write that holds messages and a removal run in one
record (the broker writes a loop turn's sends and acknowledgements together)
gives every message, and one removal row per acknowledged sequence."""

from __future__ import annotations

import mmap
from pathlib import Path

from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import AddDestination, AddMessage, RemoveMessage, RemoveMessages
from relaymq_kahadb import KahaDBConfig, KahaDBPersistenceAdapter
from relaymq_spark.journal import read_removals
from relaymq_spark.journal_decode import decode_messages

A = "queue://A"


def _message(n: int) -> Message:
    return Message(f"m{n}".encode(), destination=Destination.parse(A), message_id=f"ID:{n}",
                   durable=True)


async def test_messages_and_a_removal_run_in_one_record(tmp_path: Path) -> None:
    store = KahaDBPersistenceAdapter(KahaDBConfig(
        directory=str(tmp_path / "kahadb"), journal_disk_sync_strategy="never",
        checkpoint_interval=0, cleanup_interval=0, cleanup_on_stop=False))
    await store.start()
    try:
        assert store.removal_runs
        await store.write([AddDestination(A)] + [AddMessage(A, n, _message(n)) for n in (1, 2, 3)])
        # one write (one journal record): new messages, a run acknowledging two, one more
        await store.write([AddMessage(A, 4, _message(4)), RemoveMessages(A, (1, 2)),
                           AddMessage(A, 5, _message(5)), RemoveMessage(A, 3)])
    finally:
        await store.stop()
    (journal,) = sorted((tmp_path / "kahadb").glob("db-*.log"))
    file_id = int(journal.stem.split("-")[1])
    with open(journal, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        cols = decode_messages(buf, file_id, None, ["body", "sequence"])
        sequences = list(cols.sequence)
    assert sorted(sequences) == [1, 2, 3, 4, 5]
    removals = [(row[0], row[1], row[5]) for row in read_removals(file_id, journal, None)]
    assert sorted(removals) == [(A, 1, "remove-run"), (A, 2, "remove-run"), (A, 3, "remove")]
