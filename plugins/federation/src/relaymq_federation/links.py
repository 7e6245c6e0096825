"""``<sender>``, ``<receiver>`` and ``<peer>`` inside ``<amqp-connection>``.

Each selects local queues -- by ``address-match`` (Artemis wildcards against
the queue's address, which for a RelayMQ queue is its name) or
``queue-name`` -- when the connection starts and whenever such a queue is
created, and for each:

* ``<sender>``: consumes the local queue and sends to the remote address of
  the same name (link ``<address>:<uuid>``, source and target = the address).
  A message leaves the local queue only when the remote accepted it; released
  or modified comes back for another try, rejected goes to the local DLQ, and a
  connection lost before the outcome puts it back (at-least-once: nothing is
  lost on a crash of either side, a resend after a crash is possible);
* ``<receiver>``: pulls from the remote address into the local queue; each
  message is accepted on the remote once the local broker has it;
* ``<peer>``: both, with the capability ``qd.waypoint`` (a target capability
  on the sender, a source capability on the receiver), for Qpid Dispatch.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from relaymq.config.model import PluginElement
from relaymq.config.report import Report
from relaymq.errors import ConfigError, UnknownDelivery
from relaymq.feed import DestinationCreated
from relaymq.model.destination import Destination
from relaymq_amqp.engine import Terminus
from relaymq_amqp.mapping import from_kernel, to_kernel, with_delivery_count

from relaymq_federation import wire
from relaymq_federation.matching import matches
from relaymq_federation.publisher import LocalPublisher

log = logging.getLogger("relaymq.federation")

CREDIT = 100
#: seconds before a message the link could not take is offered again
RETRY_DELAY = 2.0


class _QueueLinks:
    """What the three elements share: which queues they serve, and when."""

    role = ""
    sends = False
    receives = False

    def __init__(self, element: PluginElement, broker: Any) -> None:
        self.broker = broker
        a = element.attributes
        self.address_match = a.get("address-match")
        self.queue_name = a.get("queue-name")
        if not self.address_match and not self.queue_name:
            raise ConfigError(f"<{element.tag}> ({element.origin}): needs address-match or queue-name")
        self.conn: Any = None
        self.publisher: LocalPublisher | None = None
        self.served: set[str] = set()
        self.senders: dict[str, Any] = {}
        self.receivers: dict[str, Any] = {}
        self.consumers: dict[str, Any] = {}
        self.forwarded = 0
        self.received = 0
        self._feed: Any = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any) -> _QueueLinks:
        return cls(element, broker)

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        """`relaymq config check` (and `run`, before anything starts)."""
        report = Report(strict=strict, quiet=True)  # returned: the caller reports them
        a = element.attributes
        if not a.get("address-match") and not a.get("queue-name"):
            report.error(f"<{element.tag}> ({element.origin}): needs address-match or queue-name")
        unknown = set(a) - {"address-match", "queue-name"}
        if unknown:
            report.warn(f"<{element.tag}> ({element.origin}): attribute(s) "
                        f"{', '.join(sorted(unknown))} not understood; ignored")
        report.raise_if_errors()
        return report.warnings

    def selects(self, queue: str) -> bool:
        if self.queue_name and queue == self.queue_name:
            return True
        return bool(self.address_match) and matches(self.address_match or "", queue)

    # -- lifecycle --------------------------------------------------------------------
    async def start(self, connection: Any) -> None:
        if not hasattr(connection, "attach_sender"):
            raise TypeError(f"<{self.role}> needs an AMQP connection, not {type(connection).__name__}")
        self.conn = connection
        self._feed = self.broker.change_feed.subscribe({DestinationCreated}, name=f"{self.role} {connection.name}")
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.role} {connection.name}")

    async def stop(self) -> None:
        if self._feed is not None:
            self._feed.close()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        for link in [*self.senders.values(), *self.receivers.values()]:
            if not link.closed:
                await link.close()
        if self.publisher is not None:
            kconn = await self.publisher.connection() if self.consumers else None
            for consumer in self.consumers.values():
                if kconn is not None:
                    kconn.close_consumer(consumer)
            await self.publisher.close()
        # a later start (management's stop, then start) begins afresh: its links and
        # local consumers are made again
        self.consumers.clear()
        self.senders.clear()
        self.receivers.clear()

    async def _run(self) -> None:
        await self.conn.wait_open()
        self.publisher = LocalPublisher(self.broker, f"{self.role} {self.conn.name}",
                                        self.conn.remote_container)
        for dest in list(self.broker.management.queues):
            if not dest.is_temporary and self.selects(dest.name):
                self.served.add(dest.name)
        while True:
            for queue in sorted(self.served):  # new ones, and links the peer closed
                await self._ensure(queue)
            try:
                event = await asyncio.wait_for(self._feed.get(), RETRY_DELAY)
            except TimeoutError:
                continue
            dest = event.destination
            if dest.is_queue and not dest.is_temporary and self.selects(dest.name):
                self.served.add(dest.name)

    async def _ensure(self, queue: str) -> None:
        """Attach what `queue` needs and does not have (again, after the peer
        closed a link or refused it)."""
        try:
            if self.sends:
                link = self.senders.get(queue)
                if link is None or link.closed:
                    self.senders[queue] = await self.conn.attach_sender(
                        f"{queue}:{uuid.uuid4()}", Terminus(kind=1, address=queue),
                        Terminus(kind=2, address=queue, capabilities=self._caps(), durable=1))
                if queue not in self.consumers:
                    await self._start_sender(queue)
            if self.receives:
                link = self.receivers.get(queue)
                if link is None or link.closed:
                    await self._start_receiver(queue)
        except Exception as exc:  # noqa: BLE001 - tried again in RETRY_DELAY seconds
            log.warning("<%s> %s: %s not served yet: %s", self.role, self.conn.name, queue, exc)

    def _caps(self) -> list[str]:
        return [wire.WAYPOINT] if self.role == "peer" else []

    # -- sending: local queue -> remote address ---------------------------------------
    async def _start_sender(self, queue: str) -> None:
        assert self.publisher is not None
        kconn = await self.publisher.connection()
        holder: dict[str, Any] = {}
        senders = self.senders

        def on_message(delivery: Any) -> None:
            msg = delivery.message
            data = msg.encoded
            if data is None or msg.encoding != "amqp":
                data = from_kernel(msg, delivery.delivery_count)
            elif delivery.delivery_count:
                data = with_delivery_count(data, delivery.delivery_count)
            did = delivery.id
            try:
                sent = senders[queue].send(data)
            except Exception as exc:  # noqa: BLE001 - the peer closed the link: try later
                log.warning("<%s> %s: %s", self.role, self.conn.name, exc)
                asyncio.get_running_loop().call_later(
                    RETRY_DELAY, lambda: self._settled(holder["c"], did, None))
                return
            sent.add_done_callback(lambda f: self._settled(holder["c"], did, f))

        consumer = await kconn.subscribe(Destination.queue(queue), prefetch=CREDIT,
                                         name=f"{self.role}-{queue}", on_message=on_message)
        holder["c"] = consumer
        self.consumers[queue] = consumer
        log.info("<%s> %s: forwarding queue %s", self.role, self.conn.name, queue)

    def _settled(self, consumer: Any, did: int, fut: asyncio.Future[Any] | None) -> None:
        if consumer.closed:
            return
        try:
            if fut is None or fut.cancelled() or fut.exception() is not None:
                consumer.release(did)  # connection lost: sent again after the reconnection
                return
            outcome = fut.result()
            if outcome.state in ("accepted", "settled"):
                self.forwarded += 1
                ack = consumer.ack(did)
                if ack is not None:
                    asyncio.ensure_future(ack)
            elif outcome.state == "rejected":
                log.warning("<%s> %s: the peer rejected a message: %s", self.role, self.conn.name,
                            outcome.condition)
                consumer.reject(did)
            else:
                consumer.release(did)
        except UnknownDelivery:
            pass

    # -- receiving: remote address -> local queue -------------------------------------
    async def _start_receiver(self, queue: str) -> None:
        assert self.publisher is not None
        publish = self.publisher.publish
        dest = Destination.queue(queue)

        def on_message(incoming: Any) -> None:
            try:
                message, _ = to_kernel(incoming.data, dest)
            except Exception as exc:  # noqa: BLE001 - not an AMQP message
                log.warning("<%s> %s: undecodable message rejected: %s", self.role,
                            self.conn.name, exc)
                incoming.reject()
                return

            def done(exc: BaseException | None) -> None:
                if exc is None:
                    self.received += 1
                    incoming.accept()
                else:
                    incoming.modify(failed=True)

            publish(message, done)

        link = await self.conn.attach_receiver(
            f"{queue}:{uuid.uuid4()}",
            Terminus(kind=1, address=queue, capabilities=self._caps(), durable=1),
            Terminus(kind=2, address=queue), credit=CREDIT, on_message=on_message)
        self.receivers[queue] = link
        log.info("<%s> %s: receiving into queue %s", self.role, self.conn.name, queue)

    def status(self) -> dict[str, Any]:
        return {"role": self.role, "queues": sorted(self.served), "forwarded": self.forwarded,
                "received": self.received}


class SenderLinks(_QueueLinks):
    role = "sender"
    sends = True


class ReceiverLinks(_QueueLinks):
    role = "receiver"
    receives = True


class PeerLinks(_QueueLinks):
    role = "peer"
    sends = True
    receives = True
