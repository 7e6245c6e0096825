"""The journal reader's decoding of every record kind kahaDB writes, without a
Spark session: a store write that holds messages and a removal run in one
record (the broker writes a loop turn's sends and acknowledgements together)
gives every message, and one removal row per acknowledged sequence."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from proton import Message as ProtonMessage
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import AddDestination, AddMessage, RemoveMessage, RemoveMessages
from relaymq_amqp.mapping import to_kernel
from relaymq_kahadb import KahaDBConfig, KahaDBPersistenceAdapter
from relaymq_spark.columns import Columns, add_encoded_many
from relaymq_spark.journal import read_messages, read_removals
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
    cols = decode_messages(journal.read_bytes(), file_id, None, ["body", "sequence"])
    sequences = list(cols.sequence)
    assert sorted(sequences) == [1, 2, 3, 4, 5]
    removals = [(row[0], row[1], row[5]) for row in read_removals(file_id, journal, None)]
    assert sorted(removals) == [(A, 1, "remove-run"), (A, 2, "remove-run"), (A, 3, "remove")]


async def _store(directory: Path, writes: list[list[object]]) -> Path:
    store = KahaDBPersistenceAdapter(KahaDBConfig(
        directory=str(directory), journal_disk_sync_strategy="never",
        checkpoint_interval=0, cleanup_interval=0, cleanup_on_stop=False))
    await store.start()
    try:
        for ops in writes:
            await store.write(ops)  # type: ignore[arg-type]
    finally:
        await store.stop()
    (journal,) = sorted(directory.glob("db-*.log"))
    return journal


def _bodies(journal: Path, keys: set[str] | None = None) -> dict[tuple[str, int], object]:
    """(destination, sequence) -> (body, body_string, op) as `format("relaymq-journal")`
    hands them to Spark (the reader's Arrow record batches)."""
    schema = pa.schema([("body", pa.binary()), ("body_string", pa.string()),
                        ("destination", pa.string()), ("sequence", pa.int64()),
                        ("op", pa.string())])
    file_id = int(journal.stem.split("-")[1])
    rows: dict[tuple[str, int], object] = {}
    for batch in read_messages(file_id, journal, keys, [], schema):
        for r in batch.to_pylist():
            rows[(r["destination"], r["sequence"])] = (r["body"], r["body_string"], r["op"])
    return rows


def _amqp(body: object) -> Message:
    return to_kernel(bytes(ProtonMessage(body=body, durable=True).encode()),
                     Destination.parse(A))[0]


async def test_bodies_of_every_shape_and_fan_out(tmp_path: Path) -> None:
    """Each row's body is its own, whatever its encoding, when one stored copy serves
    several subscriptions (fan-out references point back at it) and when bodies
    are missing."""
    shared = [Message(f"t{n}".encode(), destination=Destination.parse("topic://T"),
                      message_id=f"ID:t{n}", durable=True) for n in range(3)]
    subs = ["durable://app:one", "durable://app:two"]
    plain = {1: Message(b"text"), 2: Message(b"\x00\xff binary"), 3: _amqp(None),
             4: _amqp("amqp text"), 5: _amqp(b"amqp \x00 binary"), 6: _amqp(None), 7: Message(b"")}
    journal = await _store(tmp_path / "kahadb", [
        [AddDestination(A)] + [AddDestination(s) for s in subs],
        # one write: each message stored once, the second subscription's rows refer to it
        [AddMessage(s, n + 1, m) for n, m in enumerate(shared) for s in subs],
        [AddMessage(A, n, m) for n, m in plain.items()],
        [AddMessage(s, n + 4, m) for n, m in enumerate(shared) for s in subs]])
    rows = _bodies(journal)
    for s in subs:
        for seq in (1, 2, 3, 4, 5, 6):
            body = f"t{(seq - 1) % 3}".encode()
            assert rows[(s, seq)][:2] == (body, body.decode()), (s, seq)
    assert {rows[(s, seq)][2] for s in subs for seq in range(1, 7)} == {"add", "ref"}
    assert [rows[(A, n)][:2] for n in plain] == [
        (b"text", "text"), (b"\x00\xff binary", "\x00\ufffd binary"), (None, None),
        (b"amqp text", "amqp text"), (b"amqp \x00 binary", "amqp \x00 binary"), (None, None),
        (b"", "")]
    # only the referring subscription: its rows' bodies are still found
    two = _bodies(journal, {"durable://app:two"})
    assert sorted(two) == [("durable://app:two", seq) for seq in range(1, 7)]
    assert [two[k][0] for k in sorted(two)] == [f"t{n % 3}".encode() for n in range(6)]


async def test_amqp_bodies_read_as_a_live_read_shows_them(tmp_path: Path) -> None:
    """AMQP bodies of every kind -- among them values the reader shows as text (a
    map, a list, a number), which sit between bodies read in place -- are the
    bodies a live read of the same messages gives (`columns.add_encoded`)."""
    bodies = ["text", b"binary", None, {"k": 1}, [1, "x"], 7, "", b""]
    encoded = [bytes(ProtonMessage(body=b, durable=True).encode()) for b in bodies]
    journal = await _store(tmp_path / "kahadb", [[AddDestination(A)], [
        AddMessage(A, n + 1, to_kernel(e, Destination.parse(A))[0])
        for n, e in enumerate(encoded)]])
    live = Columns([])
    add_encoded_many(live, A, [(n + 1, 0, e) for n, e in enumerate(encoded)])
    rows = _bodies(journal)
    assert [rows[(A, n + 1)][0] for n in range(len(bodies))] == live.body
    assert live.body[2] is None and live.body[3] == b"{'k': 1}"
