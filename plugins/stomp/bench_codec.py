"""Micro-benchmark of the STOMP fast path (no sockets, no broker loop).

    .venv/bin/python plugins/stomp/bench_codec.py [--body 1024] [--n 200000]

Measures, per message:
  parse       FrameParser.feed on one SEND frame (a typical stomp.py SEND:
              destination, content-length, content-type, two properties)
  parse x32   the same, 32 frames per feed (what a busy producer's reads look like)
  to kernel   SEND headers -> kernel Message, including the cached MESSAGE header block
  MESSAGE     one delivery rendered as a MESSAGE frame (Subscription.on_message)
  total       parse + to kernel + MESSAGE
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from relaymq.dispatch.consumer import Delivery
from relaymq.model.destination import Destination
from relaymq_stomp.codec import FrameParser
from relaymq_stomp.destinations import DestinationMapper
from relaymq_stomp.frames import CLIENT_COMMANDS, V12
from relaymq_stomp.mapping import message_from_send
from relaymq_stomp.subscription import Subscription


class _Conn:
    id = "ID:bench-1-1-1:1"

    def create_temporary(self, kind: Any) -> Destination:  # pragma: no cover
        raise NotImplementedError


class _Session:
    """Just what `Subscription.on_message` touches."""

    def __init__(self) -> None:
        self.version = V12
        self.mapper = DestinationMapper(_Conn())  # type: ignore[arg-type]
        self.out: list[bytes] = []
        self.write = self.out.append
        self.auto_acks: list[Any] = []


def timed(label: str, fn: Callable[[], None], n: int, per: int = 1) -> float:
    fn()  # warm caches
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n // per):
            fn()
        best = min(best, time.perf_counter() - t0)
    us = best / n * 1e6
    print(f"  {label:<12} {us:6.2f} us")
    return us


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--body", type=int, default=1024, help="body bytes (default 1024)")
    ap.add_argument("--n", type=int, default=200_000, help="iterations (default 200000)")
    args = ap.parse_args()
    body = b"x" * args.body
    frame = (b"SEND\ndestination:/queue/orders\ncontent-type:text/plain\n"
             b"region:eu\ncount:7\ncontent-length:%d\n\n" % len(body)) + body + b"\x00"
    batch = frame * 32
    n = args.n
    print(f"STOMP codec, {len(body)} B body, frame {len(frame)} B, best of 5 x {n}")

    parser = FrameParser(commands=CLIENT_COMMANDS)
    feed = parser.feed
    t_parse = timed("parse", lambda: feed(frame), n)
    timed("parse x32", lambda: feed(batch), n, 32)

    session = _Session()
    mapper = session.mapper
    parsed = feed(frame)[0]
    seq = iter(range(1 << 62))

    prefix, escaped = "ID:bench-1-1-1:1:-1:1:", "ID\\cbench-1-1-1\\c1\\c-1\\c1\\c"

    def to_kernel() -> None:  # as the session's SEND fast path calls it
        n = str(next(seq))
        message_from_send(dict(parsed.headers), parsed.body, mapper, prefix + n,
                          1_700_000_000_000, escaped + n, not parsed.escaped)

    t_kernel = timed("to kernel", to_kernel, n)

    sub = Subscription(session, "sub-1", 1, "/queue/orders", "client-individual", False, None)
    message = message_from_send(dict(parsed.headers), parsed.body, mapper, "ID:bench-1-1-1:1:-1:1:1",
                                1_700_000_000_000)
    delivery = Delivery(1, message, 0, None)  # type: ignore[arg-type]
    out = session.out

    def render() -> None:
        sub.on_message(delivery)
        out.clear()

    t_msg = timed("MESSAGE", render, n)
    print(f"  {'total':<12} {t_parse + t_kernel + t_msg:6.2f} us")
    print(f"sample MESSAGE frame:\n{session.out[0] if session.out else _sample(sub, delivery, session)!r}")


def _sample(sub: Subscription, delivery: Delivery, session: _Session) -> bytes:
    sub.on_message(delivery)
    return session.out[-1][:400]


if __name__ == "__main__":
    main()
