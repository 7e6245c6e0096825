"""Kernel CPU per message, without a transport: send -> deliver -> ack over vm.

    .venv/bin/python core/bench/kernel_bench.py [--messages 100000] [--runs 3] [--profile]
                                                [--feed all|added] [--gc default|broker]

One `ClientConnection` sends non-persistent 1 KiB messages to a queue with one
consumer that acknowledges each delivery as it arrives: the per-message path
every transport shares (routing, the interceptor chain, dispatch, settlement,
usage accounting). Reports `time.process_time` per message, best of the runs.
With `--feed all` (or `--feed added`), one in-process change-feed subscriber to
every event kind (or to `MessageAdded` only) follows along and reads what it got
every 1000 messages: the difference to a run without is what the change feed
costs per message (a `MessageAdded` and a `MessageRemoved` each, or the former).
With `--gc broker` the garbage collector runs with the settings `relaymq run`
gives it (`relaymq.cli.tune_gc`: young collections every 50 000 allocations)
instead of CPython's defaults (every 700), which an application embedding the
broker keeps; objects that stay alive for a while (events waiting for their
subscriber) cost far more collector work with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time

from relaymq.broker.broker import Broker
from relaymq.broker.security import ConnectRequest
from relaymq.config.model import BrokerConfig
from relaymq.model.destination import Destination
from relaymq.model.message import Message


async def _run(n: int, profile: bool, feed: str | None = None) -> float:
    from relaymq.feed import MessageAdded

    broker = Broker(BrokerConfig(persistent=False))
    await broker.start()
    sub = None
    if feed == "all":
        sub = broker.change_feed.subscribe()
    elif feed == "added":
        sub = broker.change_feed.subscribe({MessageAdded})
    events = 0
    try:
        conn = await broker.connect(ConnectRequest())
        received = 0
        consumer = None

        def on_message(delivery):  # type: ignore[no-untyped-def]
            nonlocal received
            received += 1
            consumer.ack(delivery.id)

        dest = Destination.queue("bench")
        consumer = await conn.subscribe(dest, on_message=on_message)
        body = b"x" * 1024
        prof = cProfile.Profile() if profile else None
        if prof:
            prof.enable()
        t0 = time.process_time()
        for i in range(n):
            await conn.send(Message(body, destination=dest))
            if sub is not None and i % 1000 == 999:
                events += len(sub.drain())
        if sub is not None:
            await asyncio.sleep(0)
            events += len(sub.drain())
        elapsed = time.process_time() - t0
        if prof:
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        assert received == n, (received, n)
        want = 2 * n + 1 if feed == "all" else n  # (+ the queue created)
        assert sub is None or events == want, (events, want)
        return elapsed / n * 1e6
    finally:
        await broker.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--feed", choices=["all", "added"], default=None,
                   help="one in-process change-feed subscriber to every kind / MessageAdded")
    p.add_argument("--gc", choices=["default", "broker"], default="default",
                   help="CPython's collector thresholds, or those `relaymq run` sets")
    args = p.parse_args()
    if args.gc == "broker":
        from relaymq.cli import tune_gc

        tune_gc()
    results = [asyncio.run(_run(args.messages, args.profile, args.feed)) for _ in range(args.runs)]
    print({"kernel_us_per_msg": [round(r, 2) for r in results], "best": round(min(results), 2)})


if __name__ == "__main__":
    main()
