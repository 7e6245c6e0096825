"""Reading a sequence range over relaymq-amqp's own outgoing connection
(`relaymq_amqp.outgoing.AmqpConnection`, what the sink sends over), driven by
the thread that consumes the messages: no reader thread, no hand-off queue.

`read_encoded` is a generator. It runs a private event loop only while the
caller waits for messages: each batched transfer (``relaymq-seq-batch``, see
relaymq_amqp.ranges) goes straight to `on_batch` as ``[(seq, timestamp ms,
AMQP bytes), ...]`` on the same thread, and once `pause()` says so (the caller
has a record batch's worth of rows) the generator yields; the loop stands still
until the caller asks for more. Credit (`prefetch` transfers) bounds what the
broker sends meanwhile, so a paused read holds at most that much in memory.

    for _ in read_encoded(endpoint, "queue://Q", 0, 5000, rows.extend,
                          pause=lambda: len(rows) >= 2000):
        hand_over(rows)          # the loop is paused here
        rows = ...

The link reads without consuming; the broker closes it without an error at
the range's end. A lost connection (broker restart) is read again from after
the last message handed to `on_batch`, for `endpoint.retry` seconds; a refusal
(unknown destination, wrong credentials) raises `RelayMQError` at once.
Nothing here imports python-qpid-proton or pyspark.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Generator
from typing import Any

from relaymq_spark.endpoint import Endpoint, RelayMQError, address_of, ssl_context
from relaymq_spark.transfers import Encoded, split_batch

RANGE_FILTER = "relaymq-seq-range"
RANGE_DESCRIPTOR = "relaymq:seq-range:list"
RELEASE_FILTER = "relaymq-seq-release"
RELEASE_DESCRIPTOR = "relaymq:seq-release:list"
INFO_FILTER = "relaymq-seq-info"
BATCH_FILTER = "relaymq-seq-batch"
BATCH_DESCRIPTOR = "relaymq:seq-batch:list"


class DataLoss(RelayMQError):
    """Messages a query had not read yet are gone from the broker."""


def check_loss(dest: str, position: int, first: int) -> None:
    """Raise `DataLoss` when `dest` no longer holds the messages right after
    `position` (a query's read position): its lowest held number is `first`."""
    if first - 1 > position:
        raise DataLoss(
            f"{dest}: messages after sequence number {position} up to {first - 1} were removed "
            "before this query read them (another query or a consumer on the same queue, a "
            "purge, or expiry took them). Give each query its own queue (a virtual topic's "
            "Consumer.<query> queue) or durable subscription; set failOnDataLoss=false to "
            "skip them and go on")


def _never() -> bool:
    return False


def read_encoded(endpoint: Endpoint, dest: str, after: int, until: int,
                 on_batch: Callable[[list[Encoded]], None], *, batch: int = 500,
                 prefetch: int = 4, fail_on_loss: bool = True,
                 pause: Callable[[], bool] = _never) -> Generator[None, None, None]:
    """Hand the stored messages of `dest` with ``after < seq <= until`` to
    `on_batch`, in order, up to `batch` per call; yield whenever `pause()` is
    true after a call (see the module doc). `fail_on_loss`: raise `DataLoss`
    at the end when the broker no longer held messages of the range that were
    never read."""
    loop = asyncio.new_event_loop()
    pos = after
    deadline = time.monotonic() + endpoint.retry
    wait = 0.2
    try:
        while pos < until:
            read = _Read(endpoint, dest, pos, until, batch, prefetch, on_batch, pause)
            try:
                loop.run_until_complete(read.open())
                while not loop.run_until_complete(read.until_pause()):
                    pos = read.pos
                    yield
                pos = read.pos
                if fail_on_loss and read.bounds is not None:
                    check_loss(dest, read.start, read.bounds[0])
                return
            except RelayMQError as exc:
                pos = read.pos
                if not exc.retryable or time.monotonic() + wait > deadline:
                    raise
            finally:
                loop.run_until_complete(read.close())
            time.sleep(wait)  # the broker is away (a restart): try again from `pos`
            wait = min(wait * 2, 5.0)
    finally:
        loop.close()


def _retrying(endpoint: Endpoint, call: Callable[[asyncio.AbstractEventLoop], Any]) -> Any:
    """`call(loop)` on a private event loop, again while the broker cannot be
    reached, for `endpoint.retry` seconds; refusals are raised at once."""
    loop = asyncio.new_event_loop()
    deadline = time.monotonic() + endpoint.retry
    wait = 0.2
    try:
        while True:
            try:
                return call(loop)
            except RelayMQError as exc:
                if not exc.retryable or time.monotonic() + wait > deadline:
                    raise
            time.sleep(wait)
            wait = min(wait * 2, 5.0)
    finally:
        loop.close()


def _ignore(records: list[Encoded]) -> None:
    pass


def sequence_bounds(endpoint: Endpoint, dest: str) -> tuple[int, int]:
    """`(first, last)` of `dest`: the lowest sequence number it holds and the
    highest committed one, from the answer to the attach of an empty range."""
    def once(loop: asyncio.AbstractEventLoop) -> tuple[int, int]:
        read = _Read(endpoint, dest, 0, 0, 1, 1, _ignore, _never)
        try:
            loop.run_until_complete(read.open())
        finally:
            loop.run_until_complete(read.close())
        if read.bounds is None:
            raise RelayMQError(f"{dest}: the broker did not answer with sequence bounds "
                               "(is it a RelayMQ broker with relaymq-amqp?)")
        return read.bounds

    return _retrying(endpoint, once)  # type: ignore[no-any-return]


def release_through(endpoint: Endpoint, dest: str, through: int) -> None:
    """Remove what `dest` holds up to `through`: the broker closes the
    ``relaymq-seq-release`` link once the removal is stored."""
    def once(loop: asyncio.AbstractEventLoop) -> None:
        loop.run_until_complete(_Release(endpoint, dest, through).run())

    _retrying(endpoint, once)


class _Release:
    """One connection and one release link, closed by the broker when done."""

    def __init__(self, endpoint: Endpoint, dest: str, through: int) -> None:
        self.endpoint = endpoint
        self.url = endpoint.host_url()
        self.dest = dest
        self.through = through
        self.done: asyncio.Future[Any] | None = None

    async def run(self) -> None:
        from relaymq_amqp.engine import DIST_MODE_COPY, Terminus
        from relaymq_amqp.types import Described, Symbol, ULong

        self.done = asyncio.get_running_loop().create_future()
        conn = await _connect(self.endpoint, self._disconnected)
        try:
            flt: dict[str, Any] = {
                Symbol(RELEASE_FILTER): Described(Symbol(RELEASE_DESCRIPTOR), [ULong(self.through)])}
            source = Terminus(address=address_of(self.dest), kind=1,
                              distribution_mode=DIST_MODE_COPY, filter=flt)
            await _attach(conn, self.url, f"relaymq-spark-release-{uuid.uuid4()}", source,
                          Terminus(kind=2), lambda msg: None, 0, self._closed)
            try:
                cond = await asyncio.wait_for(self.done, self.endpoint.timeout)
            except TimeoutError:
                raise RelayMQError(f"no answer from {self.url} within "
                                   f"{self.endpoint.timeout:g} s") from None
            if isinstance(cond, RelayMQError):
                raise cond
            if cond is not None:
                raise RelayMQError(str(cond))
        finally:
            try:
                await asyncio.wait_for(conn.close(), 5.0)
            except (TimeoutError, OSError):
                pass

    def _closed(self, cond: Any) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(cond)

    def _disconnected(self, conn: Any, exc: Exception | None) -> None:
        self._closed(RelayMQError(f"disconnected from {self.url}"
                                  f"{': ' + str(exc) if exc else ''}", retryable=True))


async def _connect(endpoint: Endpoint, on_disconnected: Callable[[Any, Any], None]) -> Any:
    """An open relaymq-amqp connection to `endpoint` (errors as `RelayMQError`)."""
    from relaymq.spi.outgoing import AuthenticationFailed, OutgoingError
    from relaymq_amqp.outgoing import AmqpConnection

    url = endpoint.host_url()
    user, password = endpoint.credentials()
    conn = AmqpConnection(url, user=user, password=password if user else None,
                          reconnect_attempts=0, connect_timeout=endpoint.timeout,
                          ssl_context=ssl_context(endpoint), name="relaymq-spark-read",
                          on_disconnected=on_disconnected)
    try:
        await asyncio.wait_for(conn.connect(), endpoint.timeout)
    except AuthenticationFailed as exc:
        await _quietly_close(conn)
        raise RelayMQError(f"authentication failed at {url} ({exc})") from None
    except (OutgoingError, OSError, TimeoutError) as exc:
        await _quietly_close(conn)
        raise RelayMQError(f"{url}: {exc}", retryable=True) from None
    return conn


async def _quietly_close(conn: Any) -> None:
    try:
        await asyncio.wait_for(conn.close(), 5.0)
    except (TimeoutError, OSError, Exception):  # noqa: BLE001 - it never opened
        pass


async def _attach(conn: Any, url: str, name: str, source: Any, target: Any,
                  on_message: Callable[[Any], None], credit: int,
                  on_remote_close: Callable[[Any], None]) -> Any:
    """A receiver link (refusals and connection errors as `RelayMQError`)."""
    from relaymq.spi.outgoing import OutgoingError
    from relaymq_amqp.outgoing import LinkRefused

    try:
        return await conn.attach_receiver(name, source, target, on_message=on_message,
                                          credit=credit, on_remote_close=on_remote_close)
    except LinkRefused as exc:
        cond = exc.condition
        raise RelayMQError(str(cond) if cond is not None else "link refused") from None
    except (OutgoingError, OSError, TimeoutError) as exc:
        raise RelayMQError(f"{url}: {exc}", retryable=True) from None


class _Read:
    """One connection and one range link; its callbacks run on the event loop."""

    def __init__(self, endpoint: Endpoint, dest: str, after: int, until: int, batch: int,
                 prefetch: int, on_batch: Callable[[list[Encoded]], None],
                 pause: Callable[[], bool]) -> None:
        self.endpoint = endpoint
        self.url = endpoint.host_url()
        self.dest = dest
        self.start = after
        self.pos = after
        self.until = until
        self.batch = batch
        self.prefetch = max(1, prefetch)
        self.on_batch = on_batch
        self.pause = pause
        self.bounds: tuple[int, int] | None = None
        self.batched: bool | None = None
        self.conn: Any = None
        self.receiver: Any = None
        self.ended = False
        self.error: RelayMQError | None = None
        #: `pause()` said so: the link's credit is stopped (see `until_pause`)
        self.paused = False
        #: `until_pause` returned for the current pause: the caller has its rows,
        #: and the next `until_pause` grants credit again
        self.handed = False
        self.active = False
        self.waiter: asyncio.Future[None] | None = None

    async def open(self) -> None:
        from relaymq_amqp.engine import DIST_MODE_COPY, Terminus
        from relaymq_amqp.types import Described, Symbol, ULong

        self.conn = await _connect(self.endpoint, self._disconnected)
        flt: dict[str, Any] = {
            Symbol(RANGE_FILTER): Described(Symbol(RANGE_DESCRIPTOR),
                                            [ULong(self.pos), ULong(self.until)]),
            Symbol(BATCH_FILTER): Described(Symbol(BATCH_DESCRIPTOR), [ULong(self.batch)])}
        source = Terminus(address=address_of(self.dest), kind=1,
                          distribution_mode=DIST_MODE_COPY, filter=flt)
        receiver = await _attach(self.conn, self.url, f"relaymq-spark-range-{uuid.uuid4()}",
                                 source, Terminus(kind=2), self._message, self.prefetch,
                                 self._closed)
        self.receiver = receiver
        self._answered(receiver)
        if self.error is not None:
            raise self.error

    def _answered(self, receiver: Any) -> None:
        """Read the attach's answer: the bounds, and whether the broker batches."""
        if self.batched is not None:
            return
        flt = receiver.remote_source.filter if receiver.remote_source is not None else {}
        info = flt.get(INFO_FILTER)
        if info is not None:
            first, last = info.value
            self.bounds = (int(first), int(last))
        self.batched = BATCH_FILTER in flt
        if not self.batched:
            self._fail(RelayMQError(f"{self.url} does not send sequence ranges in batches "
                                    f"({BATCH_FILTER}): not a RelayMQ broker of this version"))

    def _message(self, msg: Any) -> None:
        if self.error is not None or self.ended:
            return
        self._answered(msg.receiver)
        if not self.batched:
            return
        self.active = True
        try:
            records = split_batch(msg.data)
            if records:
                self.on_batch(records)
                self.pos = records[-1][0]
        except RelayMQError as exc:
            self._fail(exc)
            return
        except Exception as exc:  # noqa: BLE001 - raised in the consuming thread
            self._fail(exc)
            return
        if not self.paused and self.pause():
            self.paused = True
            msg.receiver.stop()  # no more credit: at most what is granted comes meanwhile
            self._wake()

    def _closed(self, cond: Any) -> None:
        if cond is None:
            self.ended = True  # the end of the range
            self._wake()
        else:
            self._fail(RelayMQError(str(cond)))

    def _disconnected(self, conn: Any, exc: Exception | None) -> None:
        if not self.ended:
            self._fail(RelayMQError(f"disconnected from {self.url}"
                                    f"{': ' + str(exc) if exc else ''}", retryable=True))

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc if isinstance(exc, RelayMQError) else _Wrapped(exc)
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def until_pause(self) -> bool:
        """Run until `pause()` asked for a pause (False) or the range is read (True).

        Credit is granted again only for a pause this has returned for: a pause
        asked while the link was still opening (its first transfers can come in
        the same frames as the attach's answer) is returned first, not resumed."""
        if self.handed:
            self.handed = self.paused = False
            if self.receiver is not None and not self.ended:
                self.receiver.resume(self.prefetch)
        loop = asyncio.get_running_loop()
        while True:
            if self.error is not None:
                raise self.error.cause if isinstance(self.error, _Wrapped) else self.error
            if self.ended:
                return True
            if self.paused:
                self.handed = True
                return False
            self.active = False
            self.waiter = loop.create_future()
            try:
                await asyncio.wait_for(self.waiter, self.endpoint.timeout)
            except TimeoutError:
                if not self.active:  # nothing came for the whole timeout
                    raise RelayMQError(f"no answer from {self.url} within "
                                       f"{self.endpoint.timeout:g} s") from None
            finally:
                self.waiter = None

    async def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            self.ended = True
            try:
                await asyncio.wait_for(conn.close(), 5.0)
            except (TimeoutError, OSError):
                pass


class _Wrapped(RelayMQError):
    """An error of the caller's `on_batch`, carried to the consuming thread as is."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause
