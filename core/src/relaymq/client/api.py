"""The asyncio Python client for embedded (`vm://`) RelayMQ brokers.

```python
from relaymq import client

async with await client.connect("vm://localhost") as conn:
    await conn.send("queue://orders", b"hello", properties={"region": "eu"})
    consumer = await conn.consumer("queue://orders", selector="region = 'eu'")
    msg = await consumer.receive(timeout=1)
    print(msg.body)            # b'hello' (acknowledged on receive in ack_mode="auto")
```
Ack modes: `auto` (acknowledged when `receive` returns it), `client` (cumulative:
`msg.ack()` acknowledges it and everything received before), `individual`
(`msg.ack()` acknowledges just that one). Unacknowledged messages go back to the
queue, marked redelivered, when the consumer or connection closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from relaymq.broker.connection import ClientConnection
from relaymq.broker.security import ConnectRequest
from relaymq.dispatch.consumer import Consumer, Delivery, NackMode
from relaymq.model.destination import Destination, DestinationKind
from relaymq.model.message import BodyType, Message


def as_destination(dest: str | Destination) -> Destination:
    return dest if isinstance(dest, Destination) else Destination.parse(dest)


class ReceivedMessage:
    """A delivered message with its delivery state and settlement methods."""

    __slots__ = ("_delivery", "_consumer")

    def __init__(self, delivery: Delivery, consumer: ClientConsumer) -> None:
        self._delivery = delivery
        self._consumer = consumer

    @property
    def message(self) -> Message:
        return self._delivery.message

    @property
    def body(self) -> bytes:
        return self._delivery.message.body

    @property
    def text(self) -> str:
        return self._delivery.message.body.decode()

    @property
    def properties(self) -> dict[str, Any]:
        return self._delivery.message.properties

    @property
    def message_id(self) -> str | None:
        return self._delivery.message.message_id

    @property
    def redelivered(self) -> bool:
        return self._delivery.redelivered

    @property
    def delivery_count(self) -> int:
        """JMSXDeliveryCount: 1 on first delivery."""
        return self._delivery.delivery_count + 1

    @property
    def delivery_id(self) -> int:
        return self._delivery.id

    def __getattr__(self, name: str) -> Any:  # header fields: priority, group_id, ...
        return getattr(self._delivery.message, name)

    def ack(self) -> None:
        self._consumer._ack(self)

    def nack(self) -> None:
        """Negative ack (a poison ack): redelivery policy, else the DLQ."""
        self._consumer._settle(self, NackMode.POISON)

    def fail(self) -> None:
        """A failed delivery: counted, redelivered per policy, then dead-lettered."""
        self._consumer._settle(self, NackMode.FAILED)

    def release(self) -> None:
        """Back to the queue, not counted as a failure."""
        self._consumer._settle(self, NackMode.RELEASE)

    def reject(self) -> None:
        """Straight to the dead-letter queue."""
        self._consumer._settle(self, NackMode.REJECT)

    def __repr__(self) -> str:
        return f"<ReceivedMessage {self.message_id} body={self.body[:40]!r}>"


class ClientConsumer:
    def __init__(self, conn: Connection, ack_mode: str, txid: str | None = None) -> None:
        self._conn = conn
        self.ack_mode = ack_mode
        self._inbox: asyncio.Queue[ReceivedMessage | None] = asyncio.Queue()
        self.consumer: Consumer = None  # type: ignore[assignment]
        self.browse_done = asyncio.Event()
        self._txid = txid

    def _on_message(self, delivery: Delivery) -> None:
        self._inbox.put_nowait(ReceivedMessage(delivery, self))

    def _on_closed(self, reason: str) -> None:
        self._inbox.put_nowait(None)

    async def receive(self, timeout: float | None = None) -> ReceivedMessage | None:
        """The next message, or None after `timeout` seconds (or at a browse's end)."""
        c = self.consumer
        if c.prefetch <= 0 and not c.credit_mode and self._inbox.empty() and c.credit <= 0:
            c.pull()
        if self._inbox.empty() and c.browser and self.browse_done.is_set():
            return None
        try:
            if not self._inbox.empty():
                msg = self._inbox.get_nowait()
            elif timeout is None:
                msg = await self._inbox.get()
            else:
                msg = await asyncio.wait_for(self._inbox.get(), timeout)
        except TimeoutError:
            if c.prefetch <= 0 and not c.credit_mode and c.credit > 0:
                c.credit = 0  # the pull expired
            return None
        if msg is not None and self.ack_mode == "auto" and not c.browser:
            msg.ack()
        return msg

    async def receive_all(self, timeout: float = 0.2) -> list[ReceivedMessage]:
        """Everything that arrives until `timeout` seconds pass with nothing new."""
        out = []
        while (m := await self.receive(timeout)) is not None:
            out.append(m)
        return out

    def __aiter__(self) -> AsyncIterator[ReceivedMessage]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[ReceivedMessage]:
        while True:
            m = await self.receive()
            if m is None:
                return
            yield m

    def _ack(self, msg: ReceivedMessage) -> None:
        if self.consumer.browser:
            return
        if self.ack_mode == "client":
            self.consumer.ack_cumulative(msg.delivery_id, self._conn._txn(self._txid))
        else:
            self.consumer.ack(msg.delivery_id, self._conn._txn(self._txid))

    def _settle(self, msg: ReceivedMessage, mode: str) -> None:
        self.consumer.nack(msg.delivery_id, mode)

    async def close(self) -> None:
        self._conn.kernel.close_consumer(self.consumer)


class Connection:
    """A client connection to an embedded broker."""

    def __init__(self, kernel: ClientConnection) -> None:
        self.kernel = kernel
        self._txn_seq = 0
        self._current_txid: str | None = None

    @property
    def broker(self):  # type: ignore[no-untyped-def]
        return self.kernel.broker

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _txn(self, txid: str | None):  # type: ignore[no-untyped-def]
        txid = txid or self._current_txid
        return self.kernel.transactions.get(txid) if txid else None

    async def send(
        self, destination: str | Destination, body: bytes | str = b"", *,
        properties: dict[str, Any] | None = None, persistent: bool = False, priority: int = 4,
        ttl: int = 0, expiration: int = 0, correlation_id: str | None = None,
        reply_to: str | Destination | None = None, type: str | None = None,
        group_id: str | None = None, group_seq: int = 0, message_id: str | None = None,
        scheduled_delay: int = 0, scheduled_period: int = 0, scheduled_repeat: int = 0,
        txid: str | None = None,
    ) -> Message:
        """Send and return the message as the broker accepted it (id, timestamp)."""
        from relaymq.model.message import now_millis

        text = isinstance(body, str)
        raw = body.encode() if isinstance(body, str) else body
        m = Message(
            raw,
            destination=as_destination(destination), durable=persistent, priority=priority,
            expiration=expiration or (now_millis() + ttl if ttl else 0),
            correlation_id=correlation_id,
            reply_to=as_destination(reply_to) if reply_to else None, type=type,
            group_id=group_id, group_seq=group_seq, message_id=message_id,
            body_type=BodyType.TEXT if text else BodyType.BYTES,
            properties=dict(properties or {}), user_id=self.kernel.user,
        )
        m.scheduled_delay, m.scheduled_period, m.scheduled_repeat = (
            scheduled_delay, scheduled_period, scheduled_repeat)
        await self.kernel.send(m, txid or self._current_txid)
        return m

    async def consumer(
        self, destination: str | Destination, *, selector: str | None = None,
        prefetch: int | None = None, ack_mode: str = "auto", exclusive: bool = False,
        durable_name: str | None = None, no_local: bool = False, priority: int = 0,
    ) -> ClientConsumer:
        if ack_mode not in ("auto", "client", "individual"):
            raise ValueError(f"ack_mode must be auto, client or individual, not {ack_mode!r}")
        cc = ClientConsumer(self, ack_mode, self._current_txid)
        cc.consumer = await self.kernel.subscribe(
            as_destination(destination), selector=selector, prefetch=prefetch,
            exclusive=exclusive, durable_name=durable_name, no_local=no_local,
            priority=priority, on_message=cc._on_message,
        )
        cc.consumer.on_closed = cc._on_closed
        return cc

    async def browse(self, queue: str | Destination, selector: str | None = None) -> list[ReceivedMessage]:
        """The queue's messages in order, without consuming them."""
        cc = ClientConsumer(self, "auto")

        def end() -> None:
            cc.browse_done.set()
            cc._inbox.put_nowait(None)

        cc.consumer = await self.kernel.subscribe(
            as_destination(queue), selector=selector, browser=True, prefetch=1 << 30,
            on_message=cc._on_message, on_browse_end=end,
        )
        out = []
        while (m := await cc.receive()) is not None:
            out.append(m)
        await cc.close()
        return out

    async def unsubscribe(self, name: str) -> None:
        await self.kernel.unsubscribe(name)

    def temporary_queue(self) -> Destination:
        return self.kernel.create_temporary(DestinationKind.TEMP_QUEUE)

    def temporary_topic(self) -> Destination:
        return self.kernel.create_temporary(DestinationKind.TEMP_TOPIC)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[str]:
        """Sends and acks inside the block commit together, or roll back on error."""
        self._txn_seq += 1
        txid = f"tx-{self._txn_seq}"
        self.kernel.begin(txid)
        previous, self._current_txid = self._current_txid, txid
        try:
            yield txid
        except BaseException:
            self._current_txid = previous
            self.kernel.rollback(txid)
            raise
        self._current_txid = previous
        await self.kernel.commit(txid)

    def begin(self) -> str:
        self._txn_seq += 1
        txid = f"tx-{self._txn_seq}"
        self.kernel.begin(txid)
        self._current_txid = txid
        return txid

    async def commit(self) -> None:
        txid, self._current_txid = self._current_txid, None
        if txid is None:
            raise RuntimeError("no transaction to commit")
        await self.kernel.commit(txid)

    def rollback(self) -> None:
        txid, self._current_txid = self._current_txid, None
        if txid is None:
            raise RuntimeError("no transaction to roll back")
        self.kernel.rollback(txid)

    async def close(self) -> None:
        await self.kernel.close()


async def connect(url: str = "vm://localhost", *, username: str | None = None,
                  password: str | None = None, client_id: str | None = None) -> Connection:
    """Connect to `vm://NAME` (starting an embedded broker if needed)."""
    if not url.startswith("vm://"):
        raise ValueError(
            f"relaymq.client speaks vm:// only; for {url.split(':', 1)[0]}:// use that "
            "protocol's client (python-qpid-proton for amqp://, stomp.py for stomp://)"
        )
    from relaymq.transport.vm import embedded_broker

    broker = await embedded_broker(url)
    kernel = await broker.connect(ConnectRequest(username, password, client_id, "vm"))
    return Connection(kernel)


async def connect_broker(broker, **kw: Any) -> Connection:  # type: ignore[no-untyped-def]
    """Connect to a `Broker` object directly (tests, embedding)."""
    kernel = await broker.connect(ConnectRequest(kw.get("username"), kw.get("password"),
                                                 kw.get("client_id"), "vm"))
    return Connection(kernel)
