"""Cheap reads for 10,000 queues: the broker's totals and one page of the queue
list straight from the live queues' counters (`management.queues`), building the
full statistics (`DestinationInfo`, with the store's figures) only for the page
shown. The dashboard polls the totals every second; the list and /metrics are
read by people and scrapers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from relaymq.errors import DestinationError

from relaymq_console.views import SORTABLE, plain

#: a listing field -> the live counter it sorts by (`None`: the destination's name)
_COUNTER = {"name": None, "depth": "pending"} | {
    f: f for f in SORTABLE if f not in ("name", "depth", "store_used")}


@dataclass
class Totals:
    queues: int
    messages: int
    enqueue_rate: float
    dequeue_rate: float


_STATS, _PENDING = attrgetter("stats"), attrgetter("pending")
_ENQUEUED, _DEQUEUED = attrgetter("enqueued"), attrgetter("dequeued")


class BrokerTotals:
    """Messages waiting and in/out rates over every queue, the rates measured
    between two scans (the first gives 0, as management's per-queue rates do).

    A scan reads every queue's counters (about a microsecond a queue), so it is
    repeated at most every `len(queues) / QUEUES_PER_SECOND` seconds (1 s up to
    2,000 queues, 5 s at 10,000, at most 10 s); a dashboard polling every second
    between two scans gets the last figures. That keeps an open dashboard's cost
    per second flat however many queues there are."""

    QUEUES_PER_SECOND = 2000
    MAX_INTERVAL = 10.0

    def __init__(self) -> None:
        self._last: tuple[float, int, int] | None = None
        self._totals = Totals(0, 0, 0.0, 0.0)

    def interval(self, queues: int) -> float:
        return min(self.MAX_INTERVAL, max(1.0, queues / self.QUEUES_PER_SECOND))

    def sample(self, management: Any) -> Totals:
        queues = management.queues
        now = time.monotonic()
        last = self._last
        if last is not None and now - last[0] < self.interval(len(queues)):
            return self._totals
        stats = list(map(_STATS, queues.values()))  # in C: a third of a Python loop's time
        messages = sum(map(_PENDING, stats))
        enqueued = sum(map(_ENQUEUED, stats))
        dequeued = sum(map(_DEQUEUED, stats))
        rates = (0.0, 0.0)
        if last is not None and now > last[0]:
            span = now - last[0]
            # a deleted queue takes its counters with it: never a negative rate
            rates = (max(0.0, (enqueued - last[1]) / span), max(0.0, (dequeued - last[2]) / span))
        self._last = (now, enqueued, dequeued)
        self._totals = Totals(len(queues), messages, round(rates[0], 1), round(rates[1], 1))
        return self._totals


async def queue_page(management: Any, *, filter_text: str | None, sort: str | None,
                     page: int, size: int,
                     visible: Callable[[Any], bool] | None = None) -> dict[str, Any]:
    """What `views.page_of` gives for queues, without a full statistics object for
    every queue: filter by name (and `visible`: the queues the user may see), sort
    by a live counter, then look up the page's."""
    descending = sort is not None and sort.startswith("-")
    key = (sort[1:] if descending else sort) if sort else None
    if key is not None and key not in SORTABLE:
        raise ValueError(f"cannot sort by '{key}' (one of {', '.join(SORTABLE)})")
    needle = filter_text.lower() if filter_text else None
    rows = [(d, q) for d, q in list(management.queues.items())
            if (needle is None or needle in d.name.lower())
            and (visible is None or visible(d))]
    if key == "store_used":  # only the store knows: read every queue's (slow, rare)
        infos = {i.name: i.store_used for i in await management.destinations("queue")}
        rows.sort(key=lambda r: infos.get(r[0].name, 0), reverse=descending)
    elif key is not None:
        counter = _COUNTER[key]
        if counter is None:
            rows.sort(key=lambda r: r[0].name, reverse=descending)
        else:
            rows.sort(key=lambda r: getattr(r[1].stats, counter), reverse=descending)
    size = max(1, min(size, 1000))
    page = max(1, page)
    items = []
    for dest, _ in rows[(page - 1) * size: page * size]:
        try:
            items.append(plain(await management.destination(dest)))
        except DestinationError:  # deleted meanwhile
            continue
    return {"total": len(rows), "page": page, "size": size, "items": items}
