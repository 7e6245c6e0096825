"""Queue wildcards on SUBSCRIBE (`/queue/orders.>`), as ActiveMQ has them.

A STOMP subscription to a wildcard queue is one kernel consumer per matching
queue, under the one subscription id: the queues that exist when it subscribes,
and every matching queue created afterwards. This module tells the sessions of
one connector about new queues (a broker event, never per message). It stays
interpreted: pluggy reads its hook implementation's signature.
"""

from __future__ import annotations

from collections.abc import Callable

from relaymq.hookspecs import hookimpl
from relaymq.model.destination import Destination


class NewQueues:
    """Hook implementation: a queue was created -> `queue_added(destination)` (the
    connector hands it to its sessions)."""

    def __init__(self, queue_added: Callable[[Destination], None]) -> None:
        self.queue_added = queue_added

    @hookimpl
    def relaymq_destination_added(self, destination: Destination) -> None:
        if not destination.is_queue or destination.is_wildcard or destination.is_temporary:
            return
        self.queue_added(destination)
