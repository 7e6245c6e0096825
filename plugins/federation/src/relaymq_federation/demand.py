"""Demand: which local addresses and queues have consumers that a federation
policy serves, from the management API's consumer events (never the region).

A consumer on a topic is demand for its address (local address policies); a
consumer on a queue is demand for that queue with its selector and priority
(local queue policies: one receiver per distinct filter, see
`policies.QueueKey`). Not
counted: consumers the opposing peer's federation made here (their connection's
origin is that peer: counting them would pull its own messages back), and, for
queue policies, federation consumers of any peer unless ``include-federated``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
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
    """The consumers each key (`key_of(consumer)`, None: not ours) has, with the
    origin of each (the peer whose federation made it, None for a local one);
    `changed(key, origins)` is called at every change."""

    def __init__(self, key_of: Callable[[Any], Hashable | None],
                 changed: Callable[[Any, list[str | None]], Any]) -> None:
        self.key_of = key_of
        self.changed = changed
        self.counts: dict[Hashable, dict[int | str, str | None]] = {}
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
        self.count(key, consumer.id, event.kind == "consumer-opened", origin_of(consumer))

    def scan(self, broker: Any) -> None:
        """Count the consumers there already are (a policy that starts late)."""
        for conn in list(broker.connections):
            for consumer in list(conn.consumers.values()):
                if consumer.closed or getattr(consumer, "browser", False):
                    continue
                key = self.key_of(consumer)
                if key is not None:
                    self.count(key, consumer.id, True, origin_of(consumer))

    def count(self, key: Hashable, token: int | str, present: bool, origin: str | None) -> None:
        """Add (or remove) one reason for demand on `key`: a consumer id, or a
        durable subscription's key (it keeps its messages while offline)."""
        tokens = self.counts.setdefault(key, {})
        if present:
            tokens[token] = origin
        else:
            tokens.pop(token, None)
        if not tokens:
            del self.counts[key]
        self.changed(key, list(tokens.values()))
