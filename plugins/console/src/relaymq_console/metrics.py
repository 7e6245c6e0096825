"""Prometheus `/metrics` (text exposition format 0.0.4) from the management API."""

from __future__ import annotations

import os
import resource
import time
from operator import attrgetter
from typing import Any


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float, **labels: str) -> None:
        if labels:
            inner = ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items())
            self.lines.append(f"{name}{{{inner}}} {value}")
        else:
            self.lines.append(f"{name} {value}")


QUEUE_FAMILIES = [
    ("relaymq_queue_messages", "gauge", "messages not yet acknowledged", "depth"),
    ("relaymq_queue_consumers", "gauge", "consumers attached", "consumers"),
    ("relaymq_queue_in_flight", "gauge", "delivered, not yet acknowledged", "in_flight"),
    ("relaymq_queue_enqueued_total", "counter", "messages added", "enqueued"),
    ("relaymq_queue_dequeued_total", "counter", "messages acknowledged or removed", "dequeued"),
    ("relaymq_queue_dispatched_total", "counter", "deliveries made", "dispatched"),
    ("relaymq_queue_expired_total", "counter", "messages expired", "expired"),
    ("relaymq_queue_dead_lettered_total", "counter", "messages dead-lettered", "dead_lettered"),
    ("relaymq_queue_duplicates_total", "counter", "sends dropped as duplicates", "duplicates"),
    ("relaymq_queue_memory_bytes", "gauge", "bytes held in memory", "memory_used"),
]


async def render(broker: Any, started: float) -> str:
    m = broker.management
    out = _Out()
    # queues straight from their live counters: 10,000 queues are 100,000 lines
    queues = [(f'{{queue="{_esc(d.name)}"}} ', q.stats) for d, q in list(m.queues.items())]
    topics = await m.destinations("topic")
    lines = out.lines
    for name, kind, help_text, attr in QUEUE_FAMILIES:
        out.family(name, kind, help_text)
        value = attrgetter("pending" if attr == "depth" else attr)
        lines.extend([f"{name}{label}{value(stats)}" for label, stats in queues])
    out.family("relaymq_topic_enqueued_total", "counter", "messages published")
    for t in topics:
        out.sample("relaymq_topic_enqueued_total", t.enqueued, topic=t.name)
    out.family("relaymq_topic_consumers", "gauge", "subscribers")
    for t in topics:
        out.sample("relaymq_topic_consumers", t.consumers, topic=t.name)
    out.family("relaymq_connections", "gauge", "open client connections")
    out.sample("relaymq_connections", len(m.connections()))
    out.family("relaymq_memory_used_bytes", "gauge", "message memory in use")
    out.sample("relaymq_memory_used_bytes", broker.usage.memory.used)
    out.family("relaymq_memory_limit_bytes", "gauge", "systemUsage memory limit")
    out.sample("relaymq_memory_limit_bytes", broker.usage.memory.limit or 0)
    out.family("relaymq_store_used_bytes", "gauge", "bytes in the persistence adapter")
    out.sample("relaymq_store_used_bytes", m.store_size())
    out.family("relaymq_store_limit_bytes", "gauge", "systemUsage store limit")
    out.sample("relaymq_store_limit_bytes", m.store_limit())
    out.family("relaymq_broker_connection_up", "gauge", "1 when a broker connection is started")
    for bc in m.broker_connections():
        out.sample("relaymq_broker_connection_up", 1 if bc.state == "started" else 0,
                   connection=bc.name, kind=bc.kind)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out.family("process_cpu_seconds_total", "counter", "CPU time of the broker process")
    out.sample("process_cpu_seconds_total", round(usage.ru_utime + usage.ru_stime, 3))
    out.family("process_resident_memory_bytes", "gauge", "resident memory")
    out.sample("process_resident_memory_bytes", _rss())
    out.family("relaymq_uptime_seconds", "gauge", "seconds since the console started")
    out.sample("relaymq_uptime_seconds", round(time.monotonic() - started, 3))
    return "\n".join(out.lines) + "\n"


def _rss() -> int:
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
