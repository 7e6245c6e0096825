"""Advisory messages: what happens in the broker, published on ActiveMQ's
`ActiveMQ.Advisory.*` topics for any client (STOMP, AMQP) to subscribe to.

On when `<broker advisorySupport="true">` (ActiveMQ's default). Sources: the
management events (connections, consumers, producers) and the change feed
(destinations created and deleted; messages removed as expired or killed, for
the Expired and MessageDLQd advisories). An advisory is built only when its
topic has a subscriber at that moment, and the feed's per-message events are
asked for only while someone subscribes to an advisory topic that could carry
them, so a broker nobody watches pays nothing per message. Advisories are
non-persistent and go out in the order the events happened.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from typing import Any

from relaymq.advisory import topics as T
from relaymq.dispatch.deadletter import dead_letter_destination
from relaymq.feed.events import (
    DestinationCreated,
    DestinationDeleted,
    MessageRemoved,
    RemovalReason,
)
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
        self._feed: Any = None  # destinations created/deleted
        self._removals: Any = None  # MessageRemoved, only while someone may want them
        self._watchers: set[int] = set()  # consumers on advisory topics that carry removals
        self._tasks: list[asyncio.Task[None]] = []

    def install(self) -> None:
        """Start listening (from `Broker.start`, before recovery: recovered
        destinations come through the feed flagged and are not advised)."""
        self._stop_listening = self.management.listen(self.on_event)
        self._feed = self.broker.change_feed.subscribe(
            {DestinationCreated, DestinationDeleted}, name="advisories")
        self._tasks.append(asyncio.get_running_loop().create_task(self._follow(self._feed)))

    def uninstall(self) -> None:
        if self._stop_listening is not None:
            self._stop_listening()
            self._stop_listening = None
        for sub in (self._feed, self._removals):
            if sub is not None:
                sub.close()
        self._feed = self._removals = None
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self._watchers.clear()

    async def _follow(self, sub: Any) -> None:
        try:
            async for event in sub:
                try:
                    self.on_change(event)
                except Exception:  # noqa: BLE001 - an advisory must never hurt the broker
                    log.exception("building an advisory for %s failed", event.kind)
        except asyncio.CancelledError:
            pass

    def _watch_removals(self, consumer_id: int, dest: Destination, opened: bool) -> None:
        """Ask the feed for `MessageRemoved` only while a consumer listens on an
        advisory topic that carries Expired or MessageDLQd advisories."""
        if opened:
            if not (_matches(dest, "Expired") or _matches(dest, "MessageDLQd")):
                return
            self._watchers.add(consumer_id)
            if self._removals is None:
                self._removals = self.broker.change_feed.subscribe(
                    {MessageRemoved}, name="advisories-removed")
                self._tasks.append(asyncio.get_running_loop().create_task(
                    self._follow(self._removals)))
        else:
            self._watchers.discard(consumer_id)
            if not self._watchers and self._removals is not None:
                self._removals.close()
                self._removals = None

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
        if dest is None:
            return
        if T.is_advisory(dest):  # ActiveMQ does not advise consumers of advisory topics
            if kind in (CONSUMER_OPENED, CONSUMER_CLOSED) and event.consumer_id is not None:
                self._watch_removals(event.consumer_id, dest, kind == CONSUMER_OPENED)
            return
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

    def on_change(self, event: Any) -> None:
        """A change-feed event: destinations, and expired or killed messages."""
        if isinstance(event, MessageRemoved):
            reason = event.reason
            if reason == RemovalReason.EXPIRED:
                self._expired(event.message, event.destination)
                self._dead_lettered(event.message, event.destination, "expired")
            elif reason == RemovalReason.KILLED:
                self._dead_lettered(event.message, event.destination, "killed")
        elif isinstance(event, DestinationCreated):
            if not event.recovered:
                self._destination(event.destination, ADD)
        elif isinstance(event, DestinationDeleted):
            self._destination(event.destination, REMOVE)

    def _destination(self, dest: Destination, operation: int) -> None:
        if T.is_advisory(dest):
            return
        self.publish(T.destination_topic(dest), {"DestinationInfo": {
            "destination": dest.key, "operationType": operation}}, {})

    def _expired(self, message: Message, destination: Destination) -> None:
        if not T.is_advisory(destination):
            self.publish(T.expired_topic(destination), _payload(message, destination),
                         {T.MESSAGE_ID: message.message_id, T.DESTINATION: destination.key})

    def _dead_lettered(self, message: Message, destination: Destination, reason: str) -> None:
        if T.is_advisory(destination):
            return
        strategy = self.broker.policies.dead_letter_strategy(destination)
        if dead_letter_destination(strategy, message, destination, reason == "expired") is None:
            return  # discarded, not dead-lettered: ActiveMQ advises only real DLQ moves
        self.publish(T.dlq_topic(destination), _payload(message, destination),
                     {T.MESSAGE_ID: message.message_id, T.DESTINATION: destination.key})

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


def _matches(subscribed: Destination, family: str) -> bool:
    """Could a subscription to `subscribed` receive advisories of `family`
    (``Expired``, ``MessageDLQd``)? `ActiveMQ.Advisory.>` can, `.Expired.Queue.X` can."""
    probe = Destination.topic(f"{T.PREFIX}{family}.Queue.x")
    probe_topic = Destination.topic(f"{T.PREFIX}{family}.Topic.x")
    if subscribed.is_wildcard:
        return subscribed.matches(probe) or subscribed.matches(probe_topic)
    return subscribed.name.startswith(f"{T.PREFIX}{family}.")


def _payload(message: Message, destination: Destination) -> dict[str, Any]:
    """The advised message without its body (ActiveMQ clears it too)."""
    return {"Message": {
        "messageId": message.message_id, "destination": destination.key,
        "persistent": message.durable, "priority": message.priority,
        "timestamp": message.timestamp, "expiration": message.expiration,
        "correlationId": message.correlation_id, "type": message.type,
        "properties": dict(message.properties)}}
