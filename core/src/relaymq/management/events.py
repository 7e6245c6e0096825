"""Management events: connections, consumers and producers opening and closing.

`Management.listen(callback)` registers a synchronous callback; the first
listener registers one relay of pluggy hook implementations, so a broker nobody
listens to pays nothing beyond the hook calls it makes anyway (rare events, never
per message). A callback must not block: schedule work with
``asyncio.get_running_loop().create_task(...)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pluggy

log = logging.getLogger("relaymq.management")
hookimpl = pluggy.HookimplMarker("relaymq")

CONNECTION_OPENED = "connection-opened"
CONNECTION_CLOSED = "connection-closed"
CONSUMER_OPENED = "consumer-opened"
CONSUMER_CLOSED = "consumer-closed"
PRODUCER_OPENED = "producer-opened"
PRODUCER_CLOSED = "producer-closed"

#: every kind of `ManagementEvent`
EVENT_KINDS = (CONNECTION_OPENED, CONNECTION_CLOSED, CONSUMER_OPENED, CONSUMER_CLOSED,
               PRODUCER_OPENED, PRODUCER_CLOSED)


@dataclass(frozen=True, slots=True)
class ManagementEvent:
    """What happened, to which connection, and where (consumers and producers)."""

    kind: str  #: one of `EVENT_KINDS`
    connection_id: str | None
    client_id: str | None
    destination: str | None = None  #: consumer/producer events: the destination key
    consumer_id: int | None = None
    #: consumers/producers now on `destination` (ActiveMQ's consumerCount/producerCount)
    count: int = 0
    #: the live kernel object (ClientConnection or Consumer) for advanced listeners
    subject: Any = None


Listener = Callable[[ManagementEvent], None]


class EventRelay:
    """Hook implementations that turn kernel hooks into `ManagementEvent`s."""

    def __init__(self, management: Any) -> None:
        self.management = management
        self.listeners: list[Listener] = []

    def emit(self, event: ManagementEvent) -> None:
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - a listener must not break the broker
                log.exception("management listener %r failed on %s", listener, event.kind)

    def _connection(self, kind: str, connection: Any) -> None:
        if connection.transport == "internal":
            return
        self.emit(ManagementEvent(kind, connection.id, connection.client_id, subject=connection))

    def _consumer(self, kind: str, consumer: Any) -> None:
        conn = consumer.connection
        if conn is not None and conn.transport == "internal":
            return
        dest = consumer.destination
        self.emit(ManagementEvent(
            kind, conn.id if conn is not None else None, conn.client_id if conn is not None else None,
            dest.key, consumer.id, self.management.consumer_count(dest), consumer))

    @hookimpl
    def relaymq_connection_opened(self, connection: Any) -> None:
        self._connection(CONNECTION_OPENED, connection)

    @hookimpl
    def relaymq_connection_closed(self, connection: Any) -> None:
        self._connection(CONNECTION_CLOSED, connection)

    @hookimpl
    def relaymq_consumer_added(self, consumer: Any) -> None:
        self._consumer(CONSUMER_OPENED, consumer)

    @hookimpl
    def relaymq_consumer_removed(self, consumer: Any) -> None:
        self._consumer(CONSUMER_CLOSED, consumer)

    @hookimpl
    def relaymq_producer_added(self, connection: Any, destination: Any) -> None:
        self.emit(ManagementEvent(PRODUCER_OPENED, connection.id, connection.client_id,
                                  destination.key, None,
                                  self.management.producer_count(destination), connection))

    @hookimpl
    def relaymq_producer_removed(self, connection: Any, destination: Any) -> None:
        self.emit(ManagementEvent(PRODUCER_CLOSED, connection.id, connection.client_id,
                                  destination.key, None,
                                  self.management.producer_count(destination), connection))
