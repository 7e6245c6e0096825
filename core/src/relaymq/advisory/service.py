"""Advisory messages: what happens in the broker, published on ActiveMQ's
`ActiveMQ.Advisory.*` topics for any client (STOMP, AMQP) to subscribe to.

On when `<broker advisorySupport="true">` (ActiveMQ's default). Sources: the
management events (connections, consumers, producers) and the broker's rare-event
hooks (destinations created and deleted, messages expired and dead-lettered).
An advisory is built only when its topic has a subscriber at that moment, so a
broker nobody watches pays a dictionary lookup per event and nothing per message.
Advisories are non-persistent and go out in the order the events happened.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from typing import Any

import pluggy

from relaymq.advisory import topics as T
from relaymq.dispatch.deadletter import dead_letter_destination
from relaymq.management.events import (
    CONNECTION_CLOSED,
    CONNECTION_OPENED,
    CONSUMER_CLOSED,
    CONSUMER_OPENED,
    PRODUCER_CLOSED,
    PRODUCER_OPENED,
    ManagementEvent,
)
from relaymq.model.destination import Destination
from relaymq.model.message import BodyType, Message

log = logging.getLogger("relaymq.advisory")
hookimpl = pluggy.HookimplMarker("relaymq")

ADD, REMOVE = 0, 1  # DestinationInfo.operationType


class AdvisoryService:
    """Publishes advisories for one broker (`Broker` installs it at start-up)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.management = broker.management
        self.broker_id = broker.message_ids.connection_prefix()
        self._outbox: deque[Message] = deque()
        self._sending = False
        self._stop_listening: Any = None

    def install(self) -> None:
        self._stop_listening = self.management.listen(self.on_event)
        self.broker.plugins.register(self, name="relaymq.advisory")

    def uninstall(self) -> None:
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None
        pm = self.broker.plugins.pm
        if pm.is_registered(self):
            pm.unregister(self)

    # -- sources -------------------------------------------------------------------
    def on_event(self, event: ManagementEvent) -> None:
        kind = event.kind
        if kind in (CONNECTION_OPENED, CONNECTION_CLOSED):
            conn = event.subject
            info = {"connectionId": event.connection_id, "clientId": event.client_id,
                    "userName": conn.user, "clientIp": conn.remote_address,
                    "transport": conn.transport}
            body = ({"ConnectionInfo": info} if kind == CONNECTION_OPENED
                    else {"RemoveInfo": {"objectId": {"ConnectionId": event.connection_id}}})
            self.publish(Destination.topic(T.CONNECTION), body, {})
            return
        dest = Destination.parse(event.destination) if event.destination else None
        if dest is None or T.is_advisory(dest):
            return  # ActiveMQ does not advise consumers of advisory topics
        if kind in (CONSUMER_OPENED, CONSUMER_CLOSED):
            consumer = event.subject
            consumer_id = f"{event.connection_id}:{event.consumer_id}"
            body = ({"ConsumerInfo": {
                "consumerId": consumer_id, "destination": dest.key,
                "selector": consumer.selector_text, "prefetchSize": consumer.prefetch,
                "browser": consumer.browser, "exclusive": consumer.exclusive,
                "priority": consumer.priority, "subscriptionName": consumer.durable_name,
                "clientId": event.client_id}}
                if kind == CONSUMER_OPENED else
                {"RemoveInfo": {"objectId": {"ConsumerId": consumer_id}}})
            self.publish(T.consumer_topic(dest), body, {T.CONSUMER_COUNT: event.count})
        elif kind in (PRODUCER_OPENED, PRODUCER_CLOSED):
            producer_id = f"{event.connection_id}:{dest.key}"
            body = ({"ProducerInfo": {"producerId": producer_id, "destination": dest.key,
                                      "clientId": event.client_id}}
                    if kind == PRODUCER_OPENED else
                    {"RemoveInfo": {"objectId": {"ProducerId": producer_id}}})
            self.publish(T.producer_topic(dest), body, {T.PRODUCER_COUNT: event.count})

    @hookimpl
    def relaymq_destination_added(self, destination: Destination) -> None:
        self._destination(destination, ADD)

    @hookimpl
    def relaymq_destination_removed(self, destination: Destination) -> None:
        self._destination(destination, REMOVE)

    def _destination(self, dest: Destination, operation: int) -> None:
        if T.is_advisory(dest):
            return
        self.publish(T.destination_topic(dest), {"DestinationInfo": {
            "destination": dest.key, "operationType": operation}}, {})

    @hookimpl
    def relaymq_message_expired(self, message: Message, destination: Destination) -> None:
        if not T.is_advisory(destination):
            self.publish(T.expired_topic(destination), _payload(message, destination),
                         {T.MESSAGE_ID: message.message_id, T.DESTINATION: destination.key})

    @hookimpl
    def relaymq_message_dead_lettered(self, message: Message, destination: Destination,
                                      reason: str) -> None:
        if T.is_advisory(destination):
            return
        strategy = self.broker.policies.dead_letter_strategy(destination)
        if dead_letter_destination(strategy, message, destination, reason == "expired") is None:
            return  # discarded, not dead-lettered: ActiveMQ advises only real DLQ moves
        self.publish(T.dlq_topic(destination), _payload(message, destination),
                     {T.MESSAGE_ID: message.message_id, T.DESTINATION: destination.key,
                      T.DLQ_FAILURE_CAUSE: reason})

    # -- publishing ----------------------------------------------------------------------
    def publish(self, topic: Destination, body: dict[str, Any], properties: dict[str, Any]) -> None:
        if not self.broker.started or not self.management.has_subscribers(topic):
            return
        props = {T.ORIGIN_BROKER_ID: self.broker_id, T.ORIGIN_BROKER_NAME: self.broker.name,
                 T.ORIGIN_BROKER_URL: self._url(), **properties}
        self._outbox.append(Message(
            json.dumps(body, default=str).encode(), destination=topic, durable=False,
            type=T.ADVISORY_TYPE, properties=props, content_type="application/json",
            body_type=BodyType.TEXT))
        if not self._sending:
            self._sending = True
            asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        """Send in event order, one at a time, on the broker's internal connection."""
        try:
            while self._outbox:
                message = self._outbox.popleft()
                try:
                    await self.broker.internal_connection().send(message)
                except Exception:  # noqa: BLE001 - an advisory must never hurt the broker
                    log.exception("publishing an advisory on %s failed", message.destination)
        finally:
            self._sending = False

    def _url(self) -> str:
        for connector in self.broker.connectors:
            uri = getattr(getattr(connector, "context", None), "uri", None)
            scheme = getattr(uri, "scheme", None) or getattr(connector, "scheme", None)
            if scheme:
                return f"{scheme}://{connector.address}"
        return f"vm://{self.broker.name}"


def _payload(message: Message, destination: Destination) -> dict[str, Any]:
    """The advised message without its body (ActiveMQ clears it too)."""
    return {"Message": {
        "messageId": message.message_id, "destination": destination.key,
        "persistent": message.durable, "priority": message.priority,
        "timestamp": message.timestamp, "expiration": message.expiration,
        "correlationId": message.correlation_id, "type": message.type,
        "properties": dict(message.properties)}}
