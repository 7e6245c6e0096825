"""One small client interface over vm://, STOMP (stomp.py) and AMQP (proton), so
a scenario written for the vm:// client runs unchanged against a broker over real
sockets (core/tests/semantics, the virtual-topic tests).

    cfg = with_connector(config, "stomp")           # adds stomp://127.0.0.1:0
    client = await connect_over("stomp", broker)     # or "vm", "amqp"

stomp.py and python-qpid-proton are imported only when their transport is used.

The interface is the vm:// client's (`relaymq.client.Connection`): `send`,
`consumer(dest, ack_mode=..., prefetch=..., selector=...)`, `close`; consumers
`receive(timeout)`, `receive_all(timeout)`, `close`; received messages `body`,
`text`, `properties`, `message_id`, `redelivered`, `delivery_count`,
`correlation_id`, `type` and the settlements `ack`, `nack` (a poison ack),
`fail`, `reject`, `release`. A transport without a settlement (STOMP has only
ACK and NACK) raises `Unsupported`; scenarios name the transports they run on.

The socket clients are blocking libraries, and the broker runs on the test's
event loop: their blocking work runs on other threads (a proton connection is
owned by one worker thread, which also keeps its I/O moving), and the loop side
polls for what arrived.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig, TransportConnectorConfig
from relaymq.dispatch.deadletter import ORIGINAL_DESTINATION, ORIGINAL_EXPIRATION

POLL = 0.005


class Unsupported(NotImplementedError):
    """The transport has no way to express this (e.g. STOMP cannot release)."""


TRANSPORTS = ("vm", "stomp", "amqp")


class Listening(Protocol):
    """What a socket client needs of a broker: an in-process `Broker`, or a
    `relaymq.testing.broker_proxy.ProcessBroker` standing for a child process."""

    def connector_address(self, scheme: str) -> str: ...


#: the suffix of a transport run against a broker process (`stomp-process`)
PROCESS = "-process"


def base_transport(transport: str) -> str:
    """`stomp` for `stomp` and `stomp-process`."""
    return transport.removesuffix(PROCESS)


def transport_params(marker: Any) -> list[Any]:
    """The `transport` values of a test marked `transports(*names, process=True)`
    (unmarked: vm only): each name, and each socket transport again against a broker
    process (`stomp-process`, marked slow: a broker start each, ~2-4 s loaded)."""
    import pytest

    names: list[Any] = list(marker.args) if marker else ["vm"]
    if marker is not None and marker.kwargs.get("process", True):
        names += [pytest.param(f"{n}{PROCESS}", marks=pytest.mark.slow)
                  for n in marker.args if n != "vm"]
    return names


def with_connector(config: BrokerConfig, transport: str) -> BrokerConfig:
    """A copy of `config` that also listens for `transport` on a free loopback port
    (vm: the config itself)."""
    if transport == "vm":
        return config
    cfg = copy.copy(config)
    cfg.transport_connectors = [*config.transport_connectors,
                                TransportConnectorConfig(None, f"{transport}://127.0.0.1:0")]
    return cfg


def with_socket_connectors(config: BrokerConfig) -> BrokerConfig:
    """A copy of `config` that listens for every socket transport whose plugin is
    installed (STOMP, AMQP), each on a free loopback port: the configuration of a
    broker process shared by the `stomp-process` and `amqp-process` variants of a
    scenario (`relaymq.testing.broker_pool`), as a broker serving both protocols, like
    ActiveMQ's stock activemq.xml, runs it. A connector nobody connects to changes
    nothing a scenario observes."""
    import importlib.util

    cfg = config
    for transport in TRANSPORTS:
        if transport != "vm" and importlib.util.find_spec(f"relaymq_{transport}") is not None:
            cfg = with_connector(cfg, transport)
    return cfg


async def connect_over(transport: str, broker: Broker | Listening, **kw: Any) -> Any:
    """A client of `transport` to `broker` (which listens for it: `with_connector`);
    vm:// needs an in-process `Broker`, the socket transports also take a
    `ProcessBroker`."""
    if transport == "vm":
        from relaymq.client import connect_broker

        if not isinstance(broker, Broker):
            raise TypeError(f"vm:// connects only to an in-process Broker, not {broker!r}")

        return await connect_broker(broker, **kw)
    if transport == "stomp":
        return await asyncio.to_thread(StompClient, broker.connector_address("stomp"), **kw)
    if transport == "amqp":
        return await AmqpClient.open(broker.connector_address("amqp"), **kw)
    raise ValueError(f"unknown transport {transport!r}; one of {TRANSPORTS}")


def stomp_name(dest: str) -> str:
    kind, _, name = dest.partition("://")
    return f"/{kind}/{name}"


def key_of_stomp_name(name: str) -> str:
    _, kind, rest = name.split("/", 2)
    return f"{kind}://{rest}"


async def _poll(q: queue.Queue[Any], timeout: float | None) -> Any:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            return q.get_nowait()
        except queue.Empty:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            await asyncio.sleep(POLL)


# -- helpers for what each transport shows differently ---------------------------------------


def original_destination(m: Any) -> str | None:
    """The dead-lettered copy's original destination as a key (`queue://NAME`)."""
    if isinstance(m, Received):
        return m.original_destination
    return m.message.annotations.get(ORIGINAL_DESTINATION)


def original_expiration(m: Any) -> int:
    if isinstance(m, Received):
        return m.original_expiration
    return int(m.message.annotations.get(ORIGINAL_EXPIRATION, 0))


def expiration(m: Any) -> int:
    if isinstance(m, Received):
        return m.expiration
    return int(m.message.expiration)


# -- received messages ------------------------------------------------------------------------


class Received:
    """A message delivered over a socket transport, with its settlements."""

    body: bytes
    properties: dict[str, Any]
    message_id: str | None
    redelivered: bool
    delivery_count: int | None
    correlation_id: str | None
    type: str | None
    priority: int
    group_id: str | None
    original_destination: str | None
    original_expiration: int
    expiration: int

    @property
    def text(self) -> str:
        return self.body.decode()

    def ack(self) -> None:
        self._settle("ack")

    def nack(self) -> None:
        """A poison ack: the redelivery policy, else the DLQ."""
        self._settle("nack")

    def fail(self) -> None:
        """A failed delivery: counted, redelivered per policy, then dead-lettered."""
        self._settle("fail")

    def reject(self) -> None:
        self._settle("reject")

    def release(self) -> None:
        self._settle("release")

    def _settle(self, how: str) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.message_id} body={self.body[:40]!r}>"


class _Consumer:
    def __init__(self) -> None:
        self.inbox: queue.Queue[Received] = queue.Queue()

    async def receive(self, timeout: float | None = None) -> Received | None:
        return await _poll(self.inbox, timeout)

    async def receive_all(self, timeout: float = 0.2) -> list[Received]:
        """Everything that arrives until `timeout` passes with nothing new."""
        out = []
        while (m := await self.receive(timeout)) is not None:
            out.append(m)
        return out


# -- STOMP (stomp.py) -------------------------------------------------------------------------

# STOMP headers that are not application properties
_STOMP_HEADERS = {
    "message-id", "destination", "subscription", "ack", "redelivered", "expires", "timestamp",
    "priority", "persistent", "correlation-id", "reply-to", "type", "content-type",
    "content-length", "original-destination", "originalExpiration", "receipt", "JMSXGroupID",
    "JMSXGroupSeq", "JMSXUserID", "amq-msg-type", "dlqDeliveryFailureCause",
}
_STOMP_ACK = {"auto": "auto", "client": "client", "individual": "client-individual"}


class StompReceived(Received):
    def __init__(self, client: StompClient, headers: dict[str, str], body: bytes) -> None:
        self._client = client
        self._ack_id = headers.get("ack")
        self.headers = headers
        self.body = body
        self.properties = {k: v for k, v in headers.items() if k not in _STOMP_HEADERS}
        self.message_id = headers.get("message-id")
        self.redelivered = headers.get("redelivered") == "true"
        self.delivery_count = None  # STOMP does not say (ActiveMQ neither)
        self.correlation_id = headers.get("correlation-id")
        self.type = headers.get("type")
        self.priority = int(headers.get("priority", 4))
        self.group_id = headers.get("JMSXGroupID")
        od = headers.get("original-destination")
        self.original_destination = key_of_stomp_name(od) if od else None
        self.original_expiration = int(headers.get("originalExpiration", 0))
        self.expiration = int(headers.get("expires", 0))

    def _settle(self, how: str) -> None:
        conn = self._client.conn
        if how == "ack":
            conn.ack(self._ack_id)
        elif how == "nack":
            conn.nack(self._ack_id)
        else:
            raise Unsupported(f"STOMP has no {how}: only ACK and NACK")


class StompConsumer(_Consumer):
    def __init__(self, client: StompClient, sub_id: str) -> None:
        super().__init__()
        self.client = client
        self.sub_id = sub_id

    async def close(self) -> None:
        await self.client.request(lambda r: self.client.conn.unsubscribe(self.sub_id, receipt=r))


class StompClient:
    """A stomp.py connection; SEND and SUBSCRIBE wait for their RECEIPT (like the
    vm:// client's `send`, which returns once the broker accepted the message)."""

    def __init__(self, address: str, client_id: str | None = None) -> None:
        import stomp

        host, _, port = address.rpartition(":")
        self.conn = stomp.Connection12([(host, int(port))], heartbeats=(0, 0),
                                       reconnect_attempts_max=1, auto_decode=False)
        self.consumers: dict[str, StompConsumer] = {}
        self.receipts: set[str] = set()
        self.errors: list[Any] = []
        self._ids = itertools.count(1)
        client = self

        class Listener(stomp.ConnectionListener):  # type: ignore[misc]
            def on_message(self, frame: Any) -> None:
                c = client.consumers.get(frame.headers.get("subscription", ""))
                if c is not None:
                    body = frame.body if isinstance(frame.body, bytes) else frame.body.encode()
                    c.inbox.put(StompReceived(client, dict(frame.headers), body))

            def on_receipt(self, frame: Any) -> None:
                client.receipts.add(frame.headers["receipt-id"])

            def on_error(self, frame: Any) -> None:
                client.errors.append(frame)

        self.conn.set_listener("semantics", Listener())
        headers = {"client-id": client_id} if client_id else {}
        self.conn.connect(wait=True, headers=headers)

    def _check(self) -> None:
        if self.errors:
            frame = self.errors[0]
            raise AssertionError(f"STOMP ERROR: {frame.headers.get('message')} {frame.body!r}")

    async def request(self, send: Callable[[str], None], timeout: float = 20) -> None:
        """Send a frame with a receipt and wait for the RECEIPT (AssertionError on ERROR)."""
        rid = f"r{next(self._ids)}"
        await asyncio.to_thread(send, rid)
        deadline = time.monotonic() + timeout
        while rid not in self.receipts:
            self._check()
            if time.monotonic() >= deadline:
                raise AssertionError(f"no RECEIPT {rid} within {timeout} s")
            await asyncio.sleep(POLL)
        self._check()

    async def send(self, destination: str, body: bytes | str = b"", *,
                   properties: dict[str, Any] | None = None, persistent: bool = False,
                   priority: int = 4, ttl: int = 0, correlation_id: str | None = None,
                   type: str | None = None, group_id: str | None = None) -> None:
        headers = {k: _stomp_value(v) for k, v in (properties or {}).items()}
        headers["persistent"] = "true" if persistent else "false"
        headers["priority"] = str(priority)
        if ttl:
            headers["expires"] = str(int(time.time() * 1000) + ttl)
        if correlation_id is not None:
            headers["correlation-id"] = correlation_id
        if type is not None:
            headers["type"] = type
        if group_id is not None:
            headers["JMSXGroupID"] = group_id
        if isinstance(body, bytes):
            headers["content-length"] = str(len(body))
        await self.request(lambda r: self.conn.send(stomp_name(destination), body, headers=headers,
                                                    receipt=r))

    async def consumer(self, destination: str, *, ack_mode: str = "auto",
                       prefetch: int | None = None, selector: str | None = None,
                       exclusive: bool = False) -> StompConsumer:
        sub_id = f"s{next(self._ids)}"
        c = self.consumers[sub_id] = StompConsumer(self, sub_id)
        headers: dict[str, str] = {}
        if prefetch is not None:
            headers["activemq.prefetchSize"] = str(prefetch)
        if selector is not None:
            headers["selector"] = selector
        if exclusive:
            headers["activemq.exclusive"] = "true"
        await self.request(lambda r: self.conn.subscribe(
            stomp_name(destination), id=sub_id, ack=_STOMP_ACK[ack_mode], headers=headers,
            receipt=r))
        return c

    async def close(self) -> None:
        if self.conn.is_connected():
            await asyncio.to_thread(self.conn.disconnect)
        self._check()


def _stomp_value(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


# -- AMQP (proton) ----------------------------------------------------------------------------


class _Worker:
    """A thread that owns one proton BlockingConnection: runs the calls it is given,
    in order, and keeps the connection's I/O moving between them."""

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[Callable[[], Any], Future[Any] | None]] = queue.Queue()
        self.failures: list[BaseException] = []
        self.conn: Any = None
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="amqp-semantics", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                fn, fut = self.calls.get(timeout=POLL)
            except queue.Empty:
                if self.conn is not None and not self.closed:
                    self._pump()
                continue
            if fut is not None and not fut.set_running_or_notify_cancel():
                continue
            try:
                result = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                if fut is None:
                    self.failures.append(exc)
                else:
                    fut.set_exception(exc)
            else:
                if fut is not None:
                    fut.set_result(result)
            if self.closed:
                return
            if self.conn is not None:
                self._pump()

    def _pump(self) -> None:
        try:
            self.conn.container.timeout = POLL
            self.conn.container.process()
        except BaseException as exc:  # noqa: BLE001 - reported on the next call
            self.failures.append(exc)

    async def call(self, fn: Callable[[], Any]) -> Any:
        self.check()
        fut: Future[Any] = Future()
        self.calls.put((fn, fut))
        return await asyncio.wrap_future(fut)

    def post(self, fn: Callable[[], Any]) -> None:
        """Run `fn` soon, without waiting (settlements: the vm:// client's are synchronous)."""
        self.check()
        self.calls.put((fn, None))

    def check(self) -> None:
        if self.failures:
            raise AssertionError(f"AMQP client failed: {self.failures[0]!r}") from self.failures[0]


class AmqpReceived(Received):
    def __init__(self, consumer: AmqpConsumer, message: Any, delivery: Any) -> None:
        self._consumer = consumer
        self._delivery = delivery
        body = message.body
        self.body = body.encode() if isinstance(body, str) else bytes(body or b"")
        self.properties = dict(message.properties or {})
        self.message_id = None if message.id is None else str(message.id)
        self.redelivered = message.delivery_count > 0
        self.delivery_count = message.delivery_count + 1
        self.correlation_id = None if message.correlation_id is None else str(message.correlation_id)
        self.type = message.subject
        self.priority = message.priority
        self.group_id = message.group_id
        ann = {str(k): v for k, v in (message.annotations or {}).items()}
        od = ann.get("x-opt-" + ORIGINAL_DESTINATION.replace("_", "-"))
        self.original_destination = None if od is None else str(od)
        self.original_expiration = int(ann.get("x-opt-" + ORIGINAL_EXPIRATION.replace("_", "-"), 0))
        self.expiration = int(message.expiry_time * 1000) if message.expiry_time else 0
        if not self.expiration and message.ttl:
            self.expiration = -1  # a relative ttl: expires, at a time this client does not know

    def _settle(self, how: str) -> None:
        if self._consumer.ack_mode == "auto":
            raise AssertionError("an auto-ack delivery is settled already")
        from proton import Delivery

        d = self._delivery

        def settle() -> None:
            if how == "ack":
                d.update(Delivery.ACCEPTED)
            elif how == "reject":
                d.update(Delivery.REJECTED)
            elif how == "release":
                d.update(Delivery.RELEASED)
            else:  # nack: modified, failed and not here again (ActiveMQ's poison ack); fail: failed
                d.local.failed = True
                d.local.undeliverable = how == "nack"
                d.update(Delivery.MODIFIED)
            d.settle()

        self._consumer.client.worker.post(settle)


class AmqpConsumer(_Consumer):
    def __init__(self, client: AmqpClient, ack_mode: str) -> None:
        super().__init__()
        self.client = client
        self.ack_mode = ack_mode
        self.receiver: Any = None
        self.window = 10

    async def receive(self, timeout: float | None = None) -> Received | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.client.worker.check()
            got = await self.client.worker.call(self._take)
            if got is not None:
                return got
            if deadline is not None and time.monotonic() >= deadline:
                return None
            await asyncio.sleep(POLL)

    def _take(self) -> Received | None:
        """(worker thread) the next message the link fetched, if any."""
        fetcher, link = self.receiver.fetcher, self.receiver.link
        # the prefetch window, as Qpid JMS keeps it: credit plus what waits here
        want = self.window - len(fetcher.incoming) - link.credit
        if want > 0:
            link.flow(want)
        if not fetcher.incoming:
            return None
        message, delivery = fetcher.incoming.popleft()
        m = AmqpReceived(self, message, delivery)
        if self.ack_mode == "auto" and not delivery.settled:
            from proton import Delivery

            delivery.update(Delivery.ACCEPTED)
            delivery.settle()
        return m

    async def close(self) -> None:
        await self.client.worker.call(self.receiver.close)


class AmqpClient:
    """A proton BlockingConnection on its own thread. `send` returns once the
    transfer is settled `accepted` (SendException otherwise)."""

    def __init__(self) -> None:
        self.worker = _Worker()
        self.senders: dict[str, Any] = {}

    @classmethod
    async def open(cls, address: str, client_id: str | None = None) -> AmqpClient:
        from proton.utils import BlockingConnection

        c = cls()

        if client_id:
            raise Unsupported("proton's BlockingConnection picks its own container id")

        def connect() -> None:
            c.worker.conn = BlockingConnection(f"amqp://{address}", timeout=20)

        await c.worker.call(connect)
        return c

    async def send(self, destination: str, body: bytes | str = b"", *,
                   properties: dict[str, Any] | None = None, persistent: bool = False,
                   priority: int = 4, ttl: int = 0, correlation_id: str | None = None,
                   type: str | None = None, group_id: str | None = None) -> None:
        from proton import Message

        m = Message(body=body, durable=persistent, priority=priority,
                    properties=dict(properties) if properties else None,
                    correlation_id=correlation_id, subject=type, group_id=group_id)
        if ttl:
            m.ttl = ttl / 1000
        m.id = f"ID:semantics-{uuid.uuid4()}"  # as JMS clients (Qpid JMS) set one on every message

        def send() -> None:
            sender = self.senders.get(destination)
            if sender is None:
                sender = self.senders[destination] = self.worker.conn.create_sender(destination)
            sender.send(m)

        await self.worker.call(send)

    async def consumer(self, destination: str, *, ack_mode: str = "auto",
                       prefetch: int | None = None, selector: str | None = None,
                       exclusive: bool = False) -> AmqpConsumer:
        if ack_mode == "client":
            raise Unsupported("AMQP has no cumulative acknowledgement")
        if exclusive:
            raise Unsupported("AMQP clients have no exclusive-consumer option")
        from proton.reactor import Selector

        c = AmqpConsumer(self, ack_mode)
        credit = c.window = 10 if prefetch is None else max(prefetch, 1)

        def create() -> None:
            options = [Selector(selector)] if selector else None
            c.receiver = self.worker.conn.create_receiver(
                destination, credit=credit, options=options, name=f"{destination}-{uuid.uuid4()}")

        await self.worker.call(create)
        return c

    async def close(self) -> None:
        if self.worker.closed:
            return

        def close() -> None:
            self.worker.closed = True
            self.worker.conn.close()

        await self.worker.call(close)
        self.worker.check()
