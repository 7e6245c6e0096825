"""A broker flooded by fast producers and no consumers stays within memoryUsage."""

from __future__ import annotations

import asyncio
import resource

import pytest
from relaymq.config.model import BrokerConfig, SystemUsageConfig, UsageLimit


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
    await asyncio.sleep(1.5)
    held = sum(sent)
    peak_used = b.usage.memory.used
    rss_flooded = _rss_mb()
    assert not any(t.done() for t in tasks), "producers are held back"
    assert held < 4 * per_producer
    assert peak_used <= limit + 4 * (len(body) + 400)
    # 160k messages unbounded would be > 200 MB; bounded, growth stays near the limit.
    assert rss_flooded - rss_before < 80, (rss_before, rss_flooded)
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
