"""The outgoing-connection contract (`relaymq.spi.outgoing`) over AMQP: links
that send and receive kernel `Message`s.

A message that arrived over AMQP keeps its bytes (`encoding == "amqp"`) and is
sent unchanged; any other is encoded once with the server side's mapping
(`mapping.from_kernel`), and received bytes become messages with
`mapping.to_kernel`, as for the broker's own AMQP clients.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi import outgoing as spi

from relaymq_amqp.engine import Condition
from relaymq_amqp.mapping import (
    ENCODING,
    destination_for,
    from_kernel,
    is_selector_filter,
    to_kernel,
)
from relaymq_amqp.outgoing.common import Outcome
from relaymq_amqp.outgoing.links import IncomingMessage, Receiver, Sender

log = logging.getLogger("relaymq.amqp.outgoing")


def encoded(message: Message) -> bytes:
    data = message.encoded
    if message.encoding == ENCODING and data is not None:
        return data
    return from_kernel(message)


def contract_outcome(o: Outcome) -> spi.Outcome:
    if o.state == "accepted":
        return spi.ACCEPTED
    if o.condition is not None:
        return spi.Outcome(o.state, str(o.condition))
    return spi.Outcome(o.state)


class AmqpSender:
    """`spi.SenderLink` over an AMQP `Sender`."""

    __slots__ = ("link", "address", "_pending", "_loop")

    def __init__(self, link: Sender, address: str | None) -> None:
        self.link = link
        self.address = address
        self._pending = 0
        self._loop = link.conn.loop

    @property
    def unsettled(self) -> int:
        return self._pending

    @property
    def remote_properties(self) -> dict[str, Any]:
        """The link properties of the peer's attach."""
        return self.link.remote_properties

    @property
    def remote_offered_capabilities(self) -> list[str]:
        """The capabilities the peer's attach offered."""
        return self.link.remote_offered_capabilities

    def send(self, message: Message,
             on_settled: spi.SettleCallback | None = None) -> asyncio.Future[spi.Outcome]:
        out: asyncio.Future[spi.Outcome] = self._loop.create_future()
        inner = self.link.send(encoded(message))
        self._pending += 1

        def done(f: asyncio.Future[Outcome]) -> None:
            self._pending -= 1
            result: spi.Outcome | BaseException
            if f.cancelled():
                result = spi.ConnectionLost("the send was cancelled")
            else:
                exc = f.exception()
                result = exc if exc is not None else contract_outcome(f.result())
            if not out.done():
                if isinstance(result, BaseException):
                    out.set_exception(result)
                else:
                    out.set_result(result)
            if on_settled is not None:
                on_settled(result)

        inner.add_done_callback(done)
        return out

    async def close(self) -> None:
        await self.link.close()


class AmqpDelivery:
    """`spi.Delivery`: one received message and its settlement."""

    __slots__ = ("message", "redelivered", "_incoming")

    def __init__(self, message: Message, redelivered: bool, incoming: IncomingMessage) -> None:
        self.message = message
        self.redelivered = redelivered
        self._incoming = incoming

    def accept(self) -> None:
        self._incoming.accept()

    def release(self) -> None:
        self._incoming.release()

    def reject(self, description: str | None = None) -> None:
        self._incoming.reject(Condition("amqp:not-allowed", description) if description else None)


class AmqpReceiver:
    """`spi.ReceiverLink` over an AMQP `Receiver`. `selector_applied`: for a link
    opened with a selector, whether the peer's attach repeats the selector filter,
    which is how a source says it applies it (AMQP 1.0 §3.5.8); None without one."""

    __slots__ = ("link", "address", "selector_applied")

    def __init__(self, link: Receiver, address: str, selector: str | None = None) -> None:
        self.link = link
        self.address = address
        remote = link.remote_source
        self.selector_applied: bool | None = None if not selector else remote is not None and any(
            is_selector_filter(k, v) for k, v in (remote.filter or {}).items())

    def flow(self, credit: int) -> None:
        self.link.flow(credit)

    async def close(self) -> None:
        await self.link.detach()


class AmqpSession:
    """`spi.Session` of an `AmqpConnection` (its links share one AMQP session)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn  # the AmqpConnection (not imported: it imports this module)
        self._links: list[AmqpSender | AmqpReceiver] = []

    async def open_sender(self, address: str | None, *, durable: bool = True,
                          capabilities: list[str] | None = None, name: str | None = None,
                          properties: dict[str, Any] | None = None,
                          desired_capabilities: list[str] | None = None,
                          source_address: str | None = None) -> AmqpSender:
        await self.conn.wait_open()
        link = await self.conn.open_sender(address, capabilities=capabilities, durable=durable,
                                           name=name, properties=properties,
                                           desired_capabilities=desired_capabilities,
                                           source_address=source_address,
                                           rcv_settle_first=bool(desired_capabilities))
        sender = AmqpSender(link, address)
        self._links.append(sender)
        return sender

    async def open_receiver(self, address: str, on_delivery: Callable[[spi.Delivery], Any], *,
                            credit: int = 100, selector: str | None = None,
                            subscription_name: str | None = None, browse: bool = False,
                            capabilities: list[str] | None = None) -> AmqpReceiver:
        await self.conn.wait_open()
        dest: Destination | None
        try:
            dest = destination_for(address, capabilities)
        except Exception:  # noqa: BLE001 - a peer's own address syntax (RabbitMQ /queue/x)
            dest = None
        if subscription_name is not None and not capabilities and not address.startswith("topic://"):
            capabilities = ["topic"]

        def on_message(incoming: IncomingMessage) -> None:
            try:
                message, sections = to_kernel(incoming.data, dest or _fallback(address))
            except Exception as exc:  # noqa: BLE001 - bytes that are not an AMQP message
                log.warning("receiver %s: undecodable message rejected: %s", address, exc)
                incoming.reject(Condition("amqp:decode-error", str(exc)))
                return
            header = sections.header
            redelivered = bool(header and len(header) > 4 and header[4])
            on_delivery(AmqpDelivery(message, redelivered, incoming))

        link = await self.conn.open_receiver(
            address, on_message=on_message, credit=credit, name=subscription_name,
            capabilities=capabilities, selector=selector, durable=subscription_name is not None,
            browse=browse, configuration_durable=True)  # RabbitMQ declares durable queues so
        receiver = AmqpReceiver(link, address, selector)
        self._links.append(receiver)
        return receiver

    async def unsubscribe(self, subscription_name: str) -> None:
        await self.conn.wait_open()
        link = await self.conn.open_receiver(None, on_message=lambda m: m.release(), credit=0,
                                             name=subscription_name, capabilities=["topic"],
                                             durable=True)
        await link.close()

    async def close(self) -> None:
        for link in self._links:
            await link.close()
        self._links.clear()


def _fallback(address: str) -> Destination:
    return Destination.queue(address.strip("/").replace("/", ".") or "unknown")
