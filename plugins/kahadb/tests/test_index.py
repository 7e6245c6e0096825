"""The columnar per-key index against a plain dict model."""

from __future__ import annotations

import random

import pytest
from relaymq_kahadb.index import KeyIndex, StoreIndex
from relaymq_kahadb.journal.records import OP_ADD, OP_REMOVE, OP_REMOVE_RUN, Op


@pytest.mark.parametrize("seed", range(6))
def test_key_index_matches_a_dict(seed: int) -> None:
    rng = random.Random(seed)
    k = KeyIndex()
    model: dict[int, tuple[int, int, int]] = {}
    next_seq = 1
    for step in range(20000):
        r = rng.random()
        if r < 0.45:
            seq = next_seq if rng.random() < 0.97 else rng.randrange(1, next_seq + 1)
            next_seq = max(next_seq, seq + 1)
            loc = (rng.randrange(1, 50), rng.randrange(16, 1 << 20), rng.randrange(1, 5000))
            old = k.put(seq, *loc)
            assert old == model.get(seq)
            model[seq] = loc
        elif r < 0.85 and model:
            if rng.random() < 0.7:  # FIFO consumption from the head
                seq = min(model)
            else:
                seq = rng.choice(list(model))
            assert k.remove(seq) == model.pop(seq)
        elif r < 0.9:
            assert k.remove(next_seq + 5) is None
        elif r < 0.95 and model:
            after = rng.randrange(0, next_seq)
            limit = rng.choice([None, 1, 7, 100])
            want = sorted(s for s in model if s > after)
            if limit is not None:
                want = want[:limit]
            assert [e[0] for e in k.read(after, limit)] == want
        else:
            f = rng.randrange(1, 50)
            assert sorted(k.entries_in_file(f)) == sorted(
                (s, loc[1], loc[2]) for s, loc in model.items() if loc[0] == f)
        if step % 1000 == 0:
            assert k.live == len(model)
            assert k.nbytes == sum(loc[2] for loc in model.values())
            assert [e[0] for e in k.read(0, None)] == sorted(model)
    lo, hi = k.first_last()
    assert (lo, hi) == ((min(model), max(model)) if model else (0, 0))
    dropped = k.drop_upto(next_seq // 2)
    assert sorted(dropped) == sorted((loc[0], loc[2]) for s, loc in model.items() if s <= next_seq // 2)
    assert [e[0] for e in k.read(0, None)] == sorted(s for s in model if s > next_seq // 2)


@pytest.mark.parametrize("seed", range(4))
def test_a_removal_run_is_the_same_as_one_removal_per_sequence(seed: int) -> None:
    """REMOVE_RUN and the per-message REMOVE records it replaces leave equal indexes
    (live entries, per-file accounting, ack references), also across data files,
    with gaps in the sequences, out-of-order, repeated and unknown sequences."""
    rng = random.Random(seed)
    runs, singles = StoreIndex(), StoreIndex()
    keys = ["queue://A", "queue://B"]
    next_seq = dict.fromkeys(keys, 1)
    live: dict[str, list[int]] = {k: [] for k in keys}
    for f in range(1, 40):
        adds: list[Op] = []
        for _ in range(rng.randrange(0, 60)):
            key = rng.choice(keys)
            seq = next_seq[key] = next_seq[key] + (1 if rng.random() < 0.9 else rng.randrange(2, 9))
            adds.append((OP_ADD, key, seq, 16 * len(adds), rng.randrange(1, 3000)))
            live[key].append(seq)
        removed: list[Op] = []
        run_ops: list[Op] = []
        for key in keys:
            pool = live[key]
            take = sorted(rng.sample(pool, min(len(pool), rng.randrange(0, 50))))
            if rng.random() < 0.5:
                rng.shuffle(take)
            take += [next_seq[key] + 100] + take[:2]  # unknown and already removed
            for seq in take:
                removed.append((OP_REMOVE, key, seq, 0))
                if seq in pool:
                    pool.remove(seq)
            run_ops.append((OP_REMOVE_RUN, key, take, [0] * len(take)))
        for index, ops in ((runs, adds + run_ops), (singles, adds + removed)):
            index.apply(ops, f, 16)
        assert {k: [e[0] for e in runs.keys[k].read(0, None)] for k in keys} == {
            k: sorted(v) for k, v in live.items()}
        for k in keys:
            a, b = runs.keys[k], singles.keys[k]
            assert (a.live, a.nbytes, a.read(0, None)) == (b.live, b.nbytes, b.read(0, None))
        assert runs.file_keys == singles.file_keys
        assert runs.file_bytes == singles.file_bytes
        assert runs.ack_refs == singles.ack_refs
    assert runs.ack_refs  # acks of messages in older files were among them
