"""Demand: which local addresses and queues have consumers that a federation
policy serves, from the management API's consumer events (never the region).

A consumer on a topic is demand for its address (local address policies); a
consumer on a queue is demand for that queue (local queue policies). Not
counted: consumers the opposing peer's federation made here (their connection's
origin is that peer: counting them would pull its own messages back), and, for
queue policies, federation consumers of any peer unless ``include-federated``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("relaymq.federation")

#: the name a consumer opened by a peer's federation link carries
FEDERATION_CONSUMER_PREFIX = "federation-"


def is_federation_consumer(consumer: Any) -> bool:
    return bool(getattr(consumer, "network", False)) and \
        str(getattr(consumer, "name", "")).startswith(FEDERATION_CONSUMER_PREFIX)


def origin_of(consumer: Any) -> str | None:
    conn = getattr(consumer, "connection", None)
    return getattr(conn, "origin", None) if conn is not None else None


class Demand:
    """Counts the consumers each key (`key_of(consumer)`, None: not ours) has,
    and calls `changed(key, count)` when a key gains its first or loses its
    last one."""

    def __init__(self, key_of: Callable[[Any], str | None],
                 changed: Callable[[str, int], Any]) -> None:
        self.key_of = key_of
        self.changed = changed
        self.counts: dict[str, set[int | str]] = {}
        self._unlisten: Callable[[], Any] | None = None

    def start(self, management: Any) -> None:
        self._unlisten = management.listen(self._event)

    def stop(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None

    def _event(self, event: Any) -> None:
        if event.kind not in ("consumer-opened", "consumer-closed"):
            return
        consumer = event.subject
        if consumer is None or getattr(consumer, "browser", False):
            return
        key = self.key_of(consumer)
        if key is None:
            return
        self.count(key, consumer.id, event.kind == "consumer-opened")

    def count(self, key: str, token: int | str, present: bool) -> None:
        """Add (or remove) one reason for demand on `key`: a consumer id, or a
        durable subscription's key (it keeps its messages while offline)."""
        ids = self.counts.setdefault(key, set())
        before = len(ids)
        if present:
            ids.add(token)
        else:
            ids.discard(token)
        if not ids:
            del self.counts[key]
        if (before == 0) != (len(ids) == 0):
            self.changed(key, len(ids))

    def has(self, key: str) -> bool:
        return bool(self.counts.get(key))
