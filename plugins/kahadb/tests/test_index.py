"""The columnar per-key index against a plain dict model."""

from __future__ import annotations

import random

import pytest
from relaymq_kahadb.index import KeyIndex


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
