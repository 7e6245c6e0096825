"""Prometheus `/metrics` (text exposition format 0.0.4) from the management API."""

from __future__ import annotations

import asyncio
import os
import resource
import time
from operator import add, attrgetter
from typing import Any

from relaymq_console.journal import histogram_lines, journal_of
from relaymq_console.links import link_figures


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


#: queues per cached block of a family's lines
BLOCK = 250


class QueueLines:
    """The per-queue part of /metrics, 10 samples for each queue.

    Formatting 100,000 lines on every scrape is what made /metrics slow with 10,000
    queues. The label text of every sample (`name{queue="..."} `) is kept while the
    set of queues is unchanged, and each family's lines are kept in blocks of
    `BLOCK` queues together with the values they show: a scrape reads the counters,
    and formats again only the blocks where one changed (on a busy broker with many
    queues, most of them are idle). The loop is given back after each family, so a
    scrape never holds up message flow for long."""

    def __init__(self) -> None:
        self._names: list[str] = []
        self._prefixes: list[list[str]] = [[] for _ in QUEUE_FAMILIES]
        self._blocks: list[dict[int, tuple[list[Any], str]]] = [{} for _ in QUEUE_FAMILIES]

    def _labels(self, names: list[str]) -> list[list[str]]:
        if names != self._names:
            labels = [f'{{queue="{_esc(n)}"}} ' for n in names]
            self._prefixes = [[name + label for label in labels]
                              for name, _, _, _ in QUEUE_FAMILIES]
            self._blocks = [{} for _ in QUEUE_FAMILIES]
            self._names = names
        return self._prefixes

    async def render(self, queues: Any, lines: list[str]) -> None:
        dests = list(queues.keys())
        stats = list(map(attrgetter("stats"), queues.values()))
        prefixes = self._labels(list(map(attrgetter("name"), dests)))
        for (name, kind, help_text, attr), family, blocks in zip(
                QUEUE_FAMILIES, prefixes, self._blocks, strict=True):
            lines.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}")
            values = list(map(attrgetter("pending" if attr == "depth" else attr), stats))
            for start in range(0, len(values), BLOCK):
                shown = values[start:start + BLOCK]
                kept = blocks.get(start)
                if kept is None or kept[0] != shown:
                    text = "\n".join(map(add, family[start:start + BLOCK], map(str, shown)))
                    kept = blocks[start] = (shown, text)
                lines.append(kept[1])
            await asyncio.sleep(0)


async def render(broker: Any, started: float, queue_lines: QueueLines | None = None) -> str:
    m = broker.management
    out = _Out()
    lines = out.lines
    # queues straight from their live counters: 10,000 queues are 100,000 lines
    await (queue_lines or QueueLines()).render(m.queues, lines)
    topics = await m.destinations("topic")
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
    journal = journal_of(broker)
    if journal is not None:
        store = _esc(str(journal["store"]))
        out.family("relaymq_journal_syncs_total", "counter",
                   "durable writes of the store's journal (kahaDB: fdatasync; JDBC: commits)")
        out.sample("relaymq_journal_syncs_total", journal["syncs"], store=str(journal["store"]))
        out.family("relaymq_journal_sync_seconds", "histogram", "time one journal sync took")
        lines.extend(histogram_lines("relaymq_journal_sync_seconds", store,
                                     journal["sync_buckets"], journal["sync_seconds"]))
        out.family("relaymq_journal_batch_records", "histogram",
                   "records (JDBC: store writes) one journal write batch carried")
        lines.extend(histogram_lines("relaymq_journal_batch_records", store,
                                     journal["batch_buckets"], journal["batch_records"]))
    links = [(bc, link_figures(bc)) for bc in m.broker_connections()]
    out.family("relaymq_broker_connection_up", "gauge",
               "1 when a broker connection is started and working")
    for bc, fig in links:
        out.sample("relaymq_broker_connection_up", 1 if fig.up else 0,
                   connection=bc.name, kind=bc.kind)
    # what a broker connection reports of its lag: a mirror's last replication lag and
    # store-and-forward depth, a bridge's consumed messages waiting to be forwarded
    out.family("relaymq_broker_connection_lag_seconds", "gauge",
               "last measured delay between a message's arrival and its copy's acceptance")
    for bc, fig in links:
        if fig.lag_seconds is not None:
            out.sample("relaymq_broker_connection_lag_seconds", fig.lag_seconds,
                       connection=bc.name, kind=bc.kind)
    out.family("relaymq_broker_connection_pending_messages", "gauge",
               "messages taken on but not yet forwarded by a broker connection")
    for bc, fig in links:
        if fig.pending is not None:
            out.sample("relaymq_broker_connection_pending_messages", fig.pending,
                       connection=bc.name, kind=bc.kind)
    # connections other brokers opened to this one (a mirror's source): a standby's
    # view of what feeds it, to alert on when it stops
    incoming = m.incoming_broker_connections()
    out.family("relaymq_incoming_broker_connection_up", "gauge",
               "1 while another broker's connection to this one has a link attached")
    for ic in incoming:
        out.sample("relaymq_incoming_broker_connection_up", 1 if ic.connected else 0,
                   connection=ic.name, kind=ic.kind)
    out.family("relaymq_incoming_broker_connection_events_total", "counter",
               "events applied from another broker's connection (repeats not counted)")
    for ic in incoming:
        applied = ic.detail.get("applied")
        if isinstance(applied, int):
            out.sample("relaymq_incoming_broker_connection_events_total", applied,
                       connection=ic.name, kind=ic.kind)
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
