"""Broker events forwarded to pluggy hooks (rare events only, never per message)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

from relaymq.model.destination import Destination
from relaymq.model.message import Message

if TYPE_CHECKING:
    from relaymq.dispatch.consumer import Consumer


class BrokerEvents:
    """Calls the hooks in `hook` (the broker's pluggy relay) with `broker`, the
    broker the events are about, as each hook's `broker` argument."""

    def __init__(self, hook: pluggy.HookRelay, broker: object) -> None:
        self._broker = broker
        self._hook = hook

    def destination_added(self, destination: Destination, recovered: bool = False) -> None:
        self._hook.relaymq_destination_added(broker=self._broker, destination=destination,
                                             recovered=recovered)

    def destination_removed(self, destination: Destination) -> None:
        self._hook.relaymq_destination_removed(broker=self._broker, destination=destination)

    def consumer_added(self, consumer: Consumer) -> None:
        self._hook.relaymq_consumer_added(broker=self._broker, consumer=consumer)

    def consumer_removed(self, consumer: Consumer) -> None:
        self._hook.relaymq_consumer_removed(broker=self._broker, consumer=consumer)

    def connection_opened(self, connection: object) -> None:
        self._hook.relaymq_connection_opened(broker=self._broker, connection=connection)

    def connection_closed(self, connection: object) -> None:
        self._hook.relaymq_connection_closed(broker=self._broker, connection=connection)

    def producer_added(self, connection: object, destination: Destination) -> None:
        self._hook.relaymq_producer_added(broker=self._broker, connection=connection,
                                          destination=destination)

    def producer_removed(self, connection: object, destination: Destination) -> None:
        self._hook.relaymq_producer_removed(broker=self._broker, connection=connection,
                                            destination=destination)

    def message_dead_lettered(self, message: Message, destination: Destination, reason: str) -> None:
        self._hook.relaymq_message_dead_lettered(
            broker=self._broker, message=message, destination=destination, reason=reason
        )

    def message_expired(self, message: Message, destination: Destination) -> None:
        self._hook.relaymq_message_expired(
            broker=self._broker, message=message, destination=destination
        )

    def persistence_recovered(self, destination: Destination, count: int) -> None:
        self._hook.relaymq_persistence_recovered(
            broker=self._broker, destination=destination, count=count
        )
