"""A broker flooded by fast producers and no consumers stays within memoryUsage."""

from __future__ import annotations

import asyncio
import resource

import pytest
from relaymq.config.model import BrokerConfig, SystemUsageConfig, UsageLimit
from relaymq.testing import wait_until_async


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.slow
async def test_flood_without_consumers_is_bounded_by_memory_usage(make_broker, connect):
    limit = 8 << 20
    b = await make_broker(BrokerConfig(
        persistent=False, system_usage=SystemUsageConfig(memory=UsageLimit(limit=limit))))
    body = b"f" * 1024
    per_producer = 20_000
    sent = [0, 0, 0, 0]
    rss_before = _rss_mb()

    async def produce(i: int) -> None:
        conn = await connect(b)
        for _ in range(per_producer):
            await conn.send(f"queue://FLOOD.{i % 2}", body)
            sent[i] += 1

    tasks = [asyncio.create_task(produce(i)) for i in range(4)]
    # every producer ends up held back at the limit, long before it sent everything
    # a producer waits either for the broker's memoryUsage or for its destination's own
    # limit (the destination that filled up first holds its producer back itself)
    def held_back() -> int:
        return len(b.usage.memory.waiters) + sum(
            len(q._space_waiters) for q in b.region.queues.values())

    await wait_until_async(lambda: held_back() == 4 or any(t.done() for t in tasks),
                           "all four producers waiting for memory", timeout=60)
    held = sum(sent)
    peak_used = b.usage.memory.used
    rss_flooded = _rss_mb()
    assert not any(t.done() for t in tasks), "producers are held back"
    assert held < 4 * per_producer
    assert peak_used <= limit + 4 * (len(body) + 400)
    # 80k 1 KiB messages held unbounded would be well over 100 MB; bounded, the process
    # grows by about the limit (8 MB) plus allocator slack (4 MB measured). The bound is
    # generous on purpose: it tells a bounded broker from an unbounded one, nothing finer.
    assert rss_flooded - rss_before < 60, (rss_before, rss_flooded)
    print(f"\nflood: {held} messages accepted while blocked, memoryUsage {peak_used / 1e6:.1f} MB "
          f"of {limit / 1e6:.1f} MB, RSS {rss_before:.0f} -> {rss_flooded:.0f} MB")
    received = 0
    consumers = [await (await connect(b)).consumer(f"queue://FLOOD.{i}") for i in range(2)]

    async def drain(c) -> None:
        nonlocal received
        while await c.receive(2) is not None:
            received += 1
            if received == 4 * per_producer:
                return

    await asyncio.gather(*(drain(c) for c in consumers))
    await asyncio.gather(*tasks)
    assert received == 4 * per_producer == sum(sent)
