"""Kernel store operations -> journal batch records.

`encode_ops` turns one `PersistenceAdapter.write()` batch into the payload of
one journal record and the op tuples `StoreIndex.apply` understands. Removals
carry the data file their message lived in (read from the index now), which is
what lets the cleaner know which older files a file's acks depend on. The two
commonest batches — one send, one ack — take a single `struct.pack`. A turn's
acknowledgements of one destination (`RemoveMessages`) become one REMOVE_RUN op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from relaymq.model.codec import encode_message
from relaymq.spi.persistence import (
    AddDestination,
    AddDuplicateId,
    AddMessage,
    AddSubscription,
    RemoveDestination,
    RemoveDuplicateId,
    RemoveMessage,
    RemoveMessages,
    RemoveSubscription,
    StoreOp,
    SubscriptionRecord,
)

from relaymq_kahadb.index import StoreIndex
from relaymq_kahadb.journal.records import (
    NO_FILE,
    OP_ADD,
    OP_REMOVE,
    OP_REMOVE_DEST,
    OP_REMOVE_SUB,
    BatchEncoder,
    Op,
    single_message,
    single_remove,
)


def encode_ops(ops: Sequence[StoreOp], index: StoreIndex, checksum: bool = True
               ) -> tuple[bytes, list[Op]]:
    """(payload, op tuples) of one batch; `index` is read, not changed."""
    if len(ops) == 1:
        op = ops[0]
        if type(op) is AddMessage:  # one send: the hot path
            return single_message(OP_ADD, op.dest, op.seq, encode_message(op.message), checksum)
        if type(op) is RemoveMessage:  # one ack
            loc = index.location(op.dest, op.seq)
            return single_remove(op.dest, op.seq, loc[0] if loc is not None else NO_FILE)
        if type(op) is RemoveMessages and len(op.seqs) == 1:  # one ack, from the kernel
            seq = op.seqs[0]
            loc = index.location(op.dest, seq)
            return single_remove(op.dest, seq, loc[0] if loc is not None else NO_FILE)
    enc = BatchEncoder(checksum)
    shared: dict[int, tuple[int, int]] = {}
    for op in ops:
        t = type(op)
        if t is AddMessage:
            m = op.message  # type: ignore[union-attr]
            hit = shared.get(id(m))
            if hit is not None:  # fan-out: one copy of the bytes, many index entries
                enc.ref(op.dest, op.seq, hit[0], hit[1])  # type: ignore[union-attr]
                continue
            data = encode_message(m)
            rel = enc.message(OP_ADD, op.dest, op.seq, data)  # type: ignore[union-attr]
            shared[id(m)] = (rel, len(data))
        elif t is RemoveMessage:
            loc = index.location(op.dest, op.seq)  # type: ignore[union-attr]
            enc.remove(OP_REMOVE, op.dest, op.seq,  # type: ignore[union-attr]
                       loc[0] if loc is not None else NO_FILE)
        elif t is RemoveMessages:
            key = op.dest  # type: ignore[union-attr]
            seqs = list(op.seqs)  # type: ignore[union-attr]
            k = index.keys.get(key)
            if k is None:
                targets = [NO_FILE] * len(seqs)
            else:
                targets = [k.file_of(seq) for seq in seqs]
            enc.remove_run(key, seqs, targets)
        elif t is AddDestination:
            enc.add_dest(op.dest)  # type: ignore[union-attr]
        elif t is RemoveDestination:
            key = op.dest  # type: ignore[union-attr]
            enc.drop(OP_REMOVE_DEST, key, _upto(key, index, enc), _files_of(key, index))
        elif t is AddSubscription:
            enc.add_sub(op.record.key, record_json(op.record))  # type: ignore[union-attr]
        elif t is RemoveSubscription:
            key = op.key  # type: ignore[union-attr]
            enc.drop(OP_REMOVE_SUB, key, _upto(key, index, enc), _files_of(key, index))
        elif t is AddDuplicateId:
            enc.add_dup_id(op.address, op.seq, op.dup_id)  # type: ignore[union-attr]
        elif t is RemoveDuplicateId:
            enc.remove_dup_id(op.address, op.seq)  # type: ignore[union-attr]
        else:
            raise TypeError(f"unknown store operation {op!r}")
    return enc.payload(), enc.ops


def _upto(key: str, index: StoreIndex, enc: BatchEncoder) -> int:
    """Highest sequence of `key` so far, including adds earlier in this batch: a
    removal covers exactly the messages that exist when it is written, so that
    re-creating the destination later never loses the new ones."""
    upto = index.last_seq.get(key, 0)
    for op in enc.ops:
        if op[1] == key and op[0] <= 3 and op[2] > upto:  # ADD, MOVE, REF
            upto = op[2]
    return upto


def _files_of(key: str, index: StoreIndex) -> tuple[int, ...]:
    return tuple(sorted(f for f, fk in index.file_keys.items() if fk.get(key)))


def record_json(r: SubscriptionRecord) -> dict[str, Any]:
    return {"client_id": r.client_id, "name": r.name, "topic": r.topic, "selector": r.selector,
            "no_local": r.no_local, "extra": dict(r.extra)}


def record_from_json(d: dict[str, Any]) -> SubscriptionRecord:
    return SubscriptionRecord(client_id=d["client_id"], name=d["name"], topic=d["topic"],
                              selector=d.get("selector"), no_local=bool(d.get("no_local")),
                              extra=dict(d.get("extra") or {}))
