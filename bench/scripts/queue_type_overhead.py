"""Broker CPU per message of the Solace queue types against a plain queue.

    .venv/bin/python bench/scripts/queue_type_overhead.py [--messages 50000] [--runs 5]
                                                          [--consumers 4] [--profile KIND]

The kernel's per-message path without a transport (as core/bench/kernel_bench.py):
one `ClientConnection` sends non-persistent 1 KiB messages to a queue; `--consumers`
consumers acknowledge each delivery as it arrives. Kinds, each on a fresh broker
with relaymq-queue-types installed (so its send filter for topic subscriptions is
in the chain for every kind):

* `plain`: a standard queue, messages without a group id;
* `plain+groups`: a standard queue, messages with one of 64 group ids
  (ActiveMQ message groups);
* `partitioned`: `partitionCount="8"`, messages keyed by one of 64 group ids;
* `exclusive`: `accessType="exclusive"`;
* `lastValue`: a last value queue (every message replaces the waiting one);
* `topic->queue`: published to a topic that one plain queue subscribes to
  (`topicSubscriptions`): the mapping's cost, plus the topic's own routing.

Reports `time.process_time` per message (µs), best of the runs; runs of the kinds
alternate so background load on a shared machine hits them alike. The
difference to `plain` is what a type costs per message.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from typing import Any

from relaymq import compiled
from relaymq.broker.broker import Broker
from relaymq.broker.security import ConnectRequest
from relaymq.config import load_config_text
from relaymq.model.destination import Destination
from relaymq.model.message import Message

CONFIG = """<broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
  <destinationPolicy><policyMap><policyEntries>
    <policyEntry queue="part" partitionCount="8" partitionRebalanceDelay="0"/>
    <policyEntry queue="excl" accessType="exclusive"/>
    <policyEntry queue="lvq" queueType="lastValue"/>
  </policyEntries></policyMap></destinationPolicy>
  <destinations><queue physicalName="mapped" topicSubscriptions="bench.topic"/></destinations>
</broker>"""

KINDS = {  # kind -> (where consumers read, where messages are sent, keyed)
    "plain": ("queue://plain", "queue://plain", False),
    "plain+groups": ("queue://plain", "queue://plain", True),
    "partitioned": ("queue://part", "queue://part", True),
    "exclusive": ("queue://excl", "queue://excl", False),
    "lastValue": ("queue://lvq", "queue://lvq", False),
    "topic->queue": ("queue://mapped", "topic://bench.topic", False),
}


async def _run(kind: str, n: int, consumers: int, profile: bool) -> float:
    source, target, keyed = KINDS[kind]
    broker = Broker(load_config_text(CONFIG))
    await broker.start()
    try:
        conn = await broker.connect(ConnectRequest())
        received = 0
        subs: list[Any] = []

        def handler(i: int):  # type: ignore[no-untyped-def]
            def on_message(delivery):  # type: ignore[no-untyped-def]
                nonlocal received
                received += 1
                subs[i].ack(delivery.id)
            return on_message

        src = Destination.parse(source)
        for i in range(consumers):
            subs.append(await conn.subscribe(src, on_message=handler(i)))
        await asyncio.sleep(0.01)  # a partitioned queue's rebalance (delay 0) runs
        dest = Destination.parse(target)
        body = b"x" * 1024
        keys = [f"key-{k}" for k in range(64)]
        prof = cProfile.Profile() if profile else None
        if prof:
            prof.enable()
        t0 = time.process_time()
        if keyed:
            for i in range(n):
                await conn.send(Message(body, destination=dest, group_id=keys[i & 63]))
        else:
            for _ in range(n):
                await conn.send(Message(body, destination=dest))
        elapsed = time.process_time() - t0
        if prof:
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(20)
        assert received == n, (kind, received, n)
        return elapsed / n * 1e6
    finally:
        await broker.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--consumers", type=int, default=4)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--profile", default=None, help="profile one run of this kind")
    args = p.parse_args()
    kinds = args.kinds.split(",")
    results: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.runs):
        for kind in kinds:
            results[kind].append(asyncio.run(_run(kind, args.messages, args.consumers, False)))
    if args.profile:
        asyncio.run(_run(args.profile, args.messages, args.consumers, True))
    plain = min(results["plain"]) if "plain" in results else None
    status = compiled.status()
    print(f"build: relaymq {status.get('relaymq', '?')}, relaymq_queue_types "
          f"{status.get('relaymq_queue_types', '?')}; {args.messages} messages, "
          f"{args.consumers} consumers, best of {args.runs}")
    for kind, runs in results.items():
        best = min(runs)
        extra = f"  (+{best - plain:.2f} over plain)" if plain is not None and kind != "plain" else ""
        print(f"{kind:>14}: {best:6.2f} µs/msg{extra}   runs: {[round(r, 2) for r in runs]}")


if __name__ == "__main__":
    main()
