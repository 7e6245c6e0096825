"""A small synchronous AMQP 1.0 client for the Spark source and sink.

Executors and the driver talk to the broker with it, each call one short
connection (Spark tasks come and go; nothing is shared between them):

* `bounds(dest)` — `(first, last)` sequence numbers (attach answer of a
  ``relaymq-seq-range`` link, see relaymq_amqp.ranges), over relaymq-amqp's
  own connection (`range_read.sequence_bounds`);
* `read(dest, after, until)` — the stored messages with ``after < seq <= until``
  as `(seq, proton.Message)`; the broker closes the link at the range's end;
* `read_encoded(dest, after, until, on_batch)` — the same as encoded AMQP bytes,
  many messages per transfer (``relaymq-seq-batch``), over relaymq-amqp's own
  connection (`range_read`, what executors use; no proton there);
* `release(dest, through)` — what a query committed is removed on the broker
  (`range_read.release_through`, relaymq-amqp's connection too: a proton
  `Container` costs ~0.1 s of CPU to create, for its default TLS domains);
* `send(messages)` — persistent sends, each settled `accepted` only once stored;
  `send_encoded(data)` the same for messages already encoded (the sink).

No pyspark import here: the client is usable (and tested) on its own. `Endpoint`,
`RelayMQError` and `address_of` live in `endpoint.py` (no proton import: the
sink, journal and JDBC paths never load python-qpid-proton) and are re-exported here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

from proton import Delivery, Described, Message, SSLDomain, symbol, ulong
from proton.handlers import IncomingMessageHandler, MessagingHandler, OutgoingMessageHandler
from proton.reactor import Container, Copy, Filter

from relaymq_spark.endpoint import Endpoint, RelayMQError, address_of
from relaymq_spark.range_read import DataLoss, check_loss, release_through, sequence_bounds
from relaymq_spark.range_read import read_encoded as _read_encoded
from relaymq_spark.transfers import Encoded, split_batch

__all__ = ["Client", "DataLoss", "Encoded", "Endpoint", "RelayMQError", "address_of",
           "check_loss", "split_batch"]

RANGE_FILTER = "relaymq-seq-range"
RANGE_DESCRIPTOR = "relaymq:seq-range:list"
INFO_FILTER = "relaymq-seq-info"

class _Call(MessagingHandler):  # type: ignore[misc]
    """One connection, one link, one request; errors become `RelayMQError`."""

    def __init__(self, endpoint: Endpoint, prefetch: int = 0) -> None:
        super().__init__(prefetch=prefetch, auto_accept=False, auto_settle=True)
        self.endpoint = endpoint
        self.error: str | None = None
        self.conn: Any = None
        self.done = False
        self.retryable = False

    def on_start(self, event: Any) -> None:
        ep = self.endpoint
        user, password = ep.credentials()
        kw: dict[str, Any] = {"reconnect": False, "sasl_enabled": True}
        if user is not None:
            kw.update(user=user, password=password or "", allowed_mechs="PLAIN")
        else:
            kw["allowed_mechs"] = "ANONYMOUS"
        url = ep.host_url()
        if url.startswith("amqps"):
            domain = SSLDomain(SSLDomain.MODE_CLIENT)
            if ep.ssl_ca:
                domain.set_trusted_ca_db(ep.ssl_ca)
            domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME if ep.ssl_verify
                                           else SSLDomain.ANONYMOUS_PEER)
            kw["ssl_domain"] = domain
        self.conn = event.container.connect(url, **kw)
        self.deadline = event.container.schedule(ep.timeout, self)
        self.opened(event)

    def opened(self, event: Any) -> None:
        """Open the link (subclasses)."""

    def on_timer_task(self, event: Any) -> None:
        if not self.done:
            self.fail(f"no answer from {self.endpoint.host_url()} within "
                      f"{self.endpoint.timeout:g} s")

    def fail(self, why: str) -> None:
        if self.error is None:
            self.error = why
        self.finish()

    def finish(self) -> None:
        self.done = True
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        if self.conn is not None:
            self.conn.close()

    def on_transport_error(self, event: Any) -> None:
        cond = event.transport.condition
        why = f"{cond.name}: {cond.description}" if cond else "connection failed"
        if cond is not None and "sasl" in (cond.name or "").lower() or "auth" in why.lower():
            why = f"authentication failed at {self.endpoint.host_url()} ({why})"
        else:
            self.retryable = True
        self.fail(f"{self.endpoint.host_url()}: {why}")

    def on_connection_error(self, event: Any) -> None:
        self.retryable = True
        cond = event.connection.remote_condition
        self.fail(f"connection closed by the broker: {cond.name}: {cond.description}"
                  if cond else "connection closed by the broker")

    def on_link_error(self, event: Any) -> None:
        cond = event.link.remote_condition
        self.fail(f"{cond.name}: {cond.description}" if cond else "link refused")

    def on_disconnected(self, event: Any) -> None:
        if not self.done:
            self.retryable = True
            self.fail(f"disconnected from {self.endpoint.host_url()}")

    def run(self) -> None:
        self.deadline = None
        Container(self).run()
        if self.error is not None:
            raise RelayMQError(self.error, self.retryable)


def _seq_filter(key: str, descriptor: str, values: list[int | None]) -> Filter:
    vals = [None if v is None else ulong(v) for v in values]
    return Filter({symbol(key): Described(symbol(descriptor), cast(Any, vals))})


class _RangeCall(_Call):
    def __init__(self, endpoint: Endpoint, dest: str, flt: Filter,
                 on_message: Callable[[int, Message], None] | None, prefetch: int) -> None:
        super().__init__(endpoint, prefetch=prefetch)
        self.dest = dest
        self.flt = flt
        self.on_msg = on_message
        self.bounds: tuple[int, int] | None = None

    def opened(self, event: Any) -> None:
        event.container.create_receiver(self.conn, address_of(self.dest),
                                        options=[self.flt, Copy()])

    def on_link_opened(self, event: Any) -> None:
        self._read_info(event.link)

    def _read_info(self, link: Any) -> None:
        if self.bounds is not None:
            return
        src = link.remote_source
        if src is None or src.filter is None:
            return  # a refusal: the detach with its error follows
        data = src.filter
        data.rewind()
        info = data.get_object() if data.next() is not None else None
        value = (info or {}).get(symbol(INFO_FILTER))
        if value is not None:
            first, last = value.value
            self.bounds = (int(first), int(last))

    def on_message(self, event: Any) -> None:
        if self.on_msg is not None:
            seq, _, stamp = str(event.delivery.tag).partition(":")
            message = event.message
            if stamp and not message.creation_time:
                message.creation_time = int(stamp) / 1000.0
            self.on_msg(int(seq), message)

    def on_link_closing(self, event: Any) -> None:
        self._read_info(event.link)
        if event.link.remote_condition is None:
            self.finish()  # the end of the range
        else:
            self.on_link_error(event)


class Client:
    """Requests to one broker (see the module doc)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    def _retrying(self, call: Callable[[], Any]) -> Any:
        """Run `call`, again while the broker cannot be reached, for `endpoint.retry`
        seconds (a broker restart); refusals are raised at once."""
        deadline = time.monotonic() + self.endpoint.retry
        pause = 0.2
        while True:
            try:
                return call()
            except RelayMQError as exc:
                if not exc.retryable or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 5.0)

    def bounds(self, dest: str) -> tuple[int, int]:
        """`(first, last)`: the lowest sequence number `dest` holds, the highest committed."""
        return sequence_bounds(self.endpoint, dest)

    def read(self, dest: str, after: int, until: int, prefetch: int = 1000
             ) -> list[tuple[int, Message]]:
        """The stored messages of `dest` with `after < seq <= until`, in order."""
        out: list[tuple[int, Message]] = []
        self.read_into(dest, after, until, lambda s, m: out.append((s, m)), prefetch)
        return out

    def read_into(self, dest: str, after: int, until: int,
                  on_message: Callable[[int, Message], None], prefetch: int = 1000) -> None:
        """Call `on_message(seq, message)` for each stored message with
        `after < seq <= until`, in order; a lost connection resumes after the last
        message delivered."""
        pos = [after]

        def deliver(seq: int, m: Message) -> None:
            on_message(seq, m)
            pos[0] = seq

        def once() -> None:
            if until > pos[0]:
                _RangeCall(self.endpoint, dest,
                           _seq_filter(RANGE_FILTER, RANGE_DESCRIPTOR, [pos[0], until]),
                           deliver, prefetch).run()

        self._retrying(once)

    def read_encoded(self, dest: str, after: int, until: int,
                     on_batch: Callable[[list[Encoded]], None], batch: int = 1000,
                     prefetch: int = 4, fail_on_loss: bool = True) -> None:
        """Call `on_batch([(seq, timestamp ms, AMQP bytes), ...])` for the stored
        messages of `dest` with `after < seq <= until`, in order, up to `batch` per
        call; `prefetch` batches in flight. A lost connection resumes after the
        last message delivered. When the broker no longer holds messages of the
        range that were never read (someone else removed them), `fail_on_loss`
        raises `DataLoss` once the read is done."""
        for _ in _read_encoded(self.endpoint, dest, after, until, on_batch, batch=batch,
                               prefetch=prefetch, fail_on_loss=fail_on_loss):
            pass

    def release(self, dest: str, through: int) -> None:
        """Remove what `dest` holds up to `through` (a committed position)."""
        release_through(self.endpoint, dest, through)

    def send(self, messages: Iterable[Message], window: int = 500) -> int:
        """Send each message (its `address` says where) persistently; returns how
        many the broker accepted. A rejection fails the call."""
        call = _SendCall(self.endpoint, iter(messages), window)
        call.run()
        return call.accepted

    def send_encoded(self, messages: Iterable[bytes], window: int = 1000) -> int:
        """`send` for encoded AMQP messages: how many the broker accepted; a
        rejection fails the call."""
        call = _SendEncodedCall(self.endpoint, iter(messages), window)
        call.run()
        return call.accepted


class _SendEncodedCall(_Call):
    """Sends encoded messages (their `to` says where) with up to `window`
    unsettled; refills when half the window is settled."""

    def __init__(self, endpoint: Endpoint, messages: Iterator[bytes], window: int) -> None:
        super().__init__(endpoint)
        self.messages = messages
        self.window = window
        self.low = max(1, window // 2)
        self.sent = 0
        self.accepted = 0
        self.exhausted = False
        # outcomes are read here (on_delivery), without proton's per-delivery dispatch
        handlers: Any = self.handlers
        self.handlers = [h for h in handlers
                         if not isinstance(h, (IncomingMessageHandler, OutgoingMessageHandler))]

    def opened(self, event: Any) -> None:
        self.sender = event.container.create_sender(self.conn, None)  # anonymous relay

    def on_link_flow(self, event: Any) -> None:
        link = event.link
        if link.is_sender and link.credit > 0 and link.state & link.LOCAL_ACTIVE:
            self._fill(link)

    def _fill(self, sender: Any) -> None:
        while not self.exhausted and sender.credit > 0 and self.sent - self.accepted < self.window:
            data = next(self.messages, None)
            if data is None:
                self.exhausted = True
                break
            self.sent += 1
            sender.delivery(str(self.sent))
            sender.stream(data)
            sender.advance()
        self._maybe_done()

    def on_delivery(self, event: Any) -> None:
        dlv = event.delivery
        state = dlv.remote_state
        if not state:
            return
        if state == Delivery.ACCEPTED:
            dlv.settle()
            self.accepted += 1
            if not self.exhausted and self.sent - self.accepted <= self.low:
                self._fill(dlv.link)
            self._maybe_done()
        elif state == Delivery.REJECTED:
            cond = dlv.remote.condition
            dlv.settle()
            self.fail(f"send rejected: {cond.name}: {cond.description}" if cond
                      else "send rejected")
        elif state in (Delivery.RELEASED, Delivery.MODIFIED):
            dlv.settle()
            self.fail("send released by the broker (not stored)")

    def _maybe_done(self) -> None:
        if self.exhausted and self.accepted == self.sent and not self.done:
            self.finish()


class _SendCall(_Call):
    def __init__(self, endpoint: Endpoint, messages: Iterator[Message], window: int) -> None:
        super().__init__(endpoint)
        self.messages = messages
        self.window = window
        self.sent = 0
        self.accepted = 0
        self.exhausted = False
        self.lock = threading.Lock()

    def opened(self, event: Any) -> None:
        self.sender = event.container.create_sender(self.conn, None)  # anonymous relay

    def on_sendable(self, event: Any) -> None:
        sender = event.sender
        while not self.exhausted and sender.credit > 0 and self.sent - self.accepted < self.window:
            msg = next(self.messages, None)
            if msg is None:
                self.exhausted = True
                break
            msg.durable = True
            sender.send(msg)
            self.sent += 1
        self._maybe_done()

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        if not self.exhausted:
            self.on_sendable(event)
        self._maybe_done()

    def on_rejected(self, event: Any) -> None:
        cond = event.delivery.remote.condition
        self.fail(f"send rejected: {cond.name}: {cond.description}" if cond else "send rejected")

    def on_released(self, event: Any) -> None:
        self.fail("send released by the broker (not stored)")

    def _maybe_done(self) -> None:
        if self.exhausted and self.accepted == self.sent and not self.done:
            self.finish()
