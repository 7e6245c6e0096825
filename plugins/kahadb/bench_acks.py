"""What a turn's acknowledgements cost kahaDB on the event loop (no broker, no disk).

    .venv/bin/python plugins/kahadb/bench_acks.py [--acks 200000] [--turn 64] [--rounds 3]

The loop-side work of one store write of removals: making the store operations,
`encode_ops` (the journal payload) and `StoreIndex.apply`, per acknowledgement,
for the two ways the removals can come:

* per-message: one `RemoveMessage` each, journaled as one REMOVE op each (what
  the broker handed every store before removal runs, and still hands a store
  without `removal_runs`);
* runs: the kernel's `RemoveMessages` per destination, one REMOVE_RUN op.

The writer thread's share (record checksum, `pwrite`, `fdatasync`) is left out:
it is per record, not per acknowledgement. Run it on the compiled build (`make
compile`); `docs/benchmarking.md` has the figures. A benchmark, never a test.
"""

from __future__ import annotations

import argparse
import time

from relaymq.spi.persistence import RemoveMessage, RemoveMessages, StoreOp
from relaymq_kahadb import encoding, index
from relaymq_kahadb.encoding import encode_ops
from relaymq_kahadb.index import StoreIndex
from relaymq_kahadb.journal.records import OP_ADD

KEY = "queue://relaymq-bench-stomp-queue"


def run(style: str, acks: int, turn: int) -> float:
    """CPU µs per acknowledgement for `acks` in-order acks, `turn` per write."""
    idx = StoreIndex()
    idx.apply([(OP_ADD, KEY, s, 100 + 1100 * s, 1100) for s in range(1, acks + 1)], 1, 16)
    t = time.process_time()
    for lo in range(1, acks + 1, turn):
        if style == "per-message":
            ops: list[StoreOp] = [RemoveMessage(KEY, s) for s in range(lo, min(lo + turn, acks + 1))]
        else:
            seqs: dict[str, list[int]] = {}
            for s in range(lo, min(lo + turn, acks + 1)):  # as the store writer collects them
                got = seqs.get(KEY)
                if got is None:
                    seqs[KEY] = [s]
                else:
                    got.append(s)
            ops = [RemoveMessages(k, tuple(v)) for k, v in seqs.items()]
        _payload, parsed = encode_ops(ops, idx)
        idx.apply(parsed, 2, 16)
    spent = time.process_time() - t
    assert idx.keys[KEY].live == 0
    return spent / acks * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--acks", type=int, default=200_000)
    ap.add_argument("--turn", type=int, default=64, help="acks per store write")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    compiled = all(m.__file__ is not None and m.__file__.endswith(".so") for m in (encoding, index))
    print(f"kahaDB encoding and index {'compiled' if compiled else 'interpreted'}; "
          f"{args.acks} acks, {args.turn} per write")
    for _ in range(args.rounds):
        print("  ".join(f"{style}: {run(style, args.acks, args.turn):.3f} µs/ack"
                        for style in ("per-message", "runs")))


if __name__ == "__main__":
    main()
