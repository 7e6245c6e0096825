"""The bridge engine: consume from the source, send to the target, acknowledge
by the quality of service, and start again after a failure.

One bridge owns two outgoing connections (from the kernel registry, so any
installed transport serves them). Like Artemis' JMSBridge, it treats any loss
of either connection as a failure: both are closed, and after
`failure-retry-interval` ms both are made again, up to `max-retries` times
(-1: forever); then the bridge stops (FAILED) and says why. Messages consumed
and not acknowledged when a failure happens are redelivered by the source.

Quality of service, per batch:

* AT_MOST_ONCE: acknowledge the batch on the source, then send it. A failure
  between the two loses the batch; nothing is sent twice.
* DUPLICATES_OK: send the batch, wait until the target accepted every message,
  then acknowledge it. A failure between the two resends the batch.
* ONCE_AND_ONLY_ONCE: as DUPLICATES_OK, and every message carries
  `_AMQ_DUPL_ID` (a stable id from the source message), so a target with
  duplicate detection (RelayMQ, Artemis) drops what is resent after a failure.
  A target without it (ActiveMQ Classic, RabbitMQ) gets each batch in a STOMP
  transaction with a marker (`marker.py`); over AMQP, which has no transaction
  here, the bridge refuses to run (FAILED, with the reason) rather than promise
  what it cannot keep.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import logging
import time
from typing import Any

from relaymq.errors import ConfigError
from relaymq.model.message import Message
from relaymq.outgoing import OutgoingConnections
from relaymq.spi.outgoing import (
    ConnectionState,
    ConnectOptions,
    Delivery,
    OutgoingConnection,
    ReceiverLink,
    SenderLink,
)

from relaymq_bridge.config import BridgeConfig, QualityOfService
from relaymq_bridge.marker import MarkerLedger, listed, marker_destination, window_size
from relaymq_bridge.recent import RecentIds

log = logging.getLogger("relaymq.bridge")

DUPLICATE_ID = "_AMQ_DUPL_ID"
MESSAGE_ID_LIST = "ACTIVEMQ_BRIDGE_MSG_ID_LIST"


class BridgeState(enum.StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    RETRYING = "retrying"
    FAILED = "failed"  # gave up after max-retries


class BridgeFailure(Exception):
    """Something the bridge recovers from by connecting again."""


class Unfit(Exception):
    """A peer cannot do what the bridge's configuration asks of it: connecting
    again would not change that, so the bridge stops (FAILED) with the reason
    instead of forwarding what it should not, or with a weaker guarantee."""


class SourceUnfit(Unfit):
    """The source does not apply the bridge's selector."""


class TargetUnfit(Unfit):
    """ONCE_AND_ONLY_ONCE to a target that neither drops duplicates nor takes the
    transaction the bridge would commit a batch and its marker in."""


#: products (AMQP open `product`, STOMP CONNECTED `server`) that ignore `_AMQ_DUPL_ID`
WITHOUT_DUPLICATE_DETECTION = ("ActiveMQ", "RabbitMQ")


def peer_product(conn: Any) -> str:
    """What the peer says it is: STOMP's CONNECTED `server` (``RabbitMQ/3.10.8``),
    or AMQP's open properties `product` and `version`; "" when it says nothing."""
    server = str(getattr(conn, "server", None) or "")
    if server:
        return server
    props = getattr(conn, "remote_properties", None) or {}
    product = str(props.get("product") or "")
    version = str(props.get("version") or "")
    return f"{product}/{version}" if product and version else product


def selector_ignored(source: Any, receiver: Any) -> str | None:
    """Why the source will not apply the bridge's selector, or None when it does:
    RabbitMQ has no selectors (over STOMP or AMQP it ignores them and delivers
    every message); an AMQP source applies one only when its attach repeats the
    selector filter (AMQP 1.0 §3.5.8)."""
    server = str(getattr(source, "server", None) or "")  # STOMP's CONNECTED `server`
    product = getattr(source, "remote_properties", {}).get("product")  # AMQP's open
    if server.startswith("RabbitMQ/") or str(product) == "RabbitMQ":
        # its AMQP 1.0 plugin even repeats the filter it ignores
        return f"the source ({server or product}) does not apply selectors"
    if getattr(receiver, "selector_applied", None) is False:  # an AMQP source said so
        return "the source's answer to the receiving link does not carry the selector filter: it does not apply it"
    return None


class Bridge:
    """One configured bridge."""

    def __init__(self, config: BridgeConfig, outgoing: OutgoingConnections,
                 resolve_uri: Any = None, config_error: str | None = None) -> None:
        #: why the configuration is unusable: the bridge stays FAILED, the broker
        #: hosting it and its other bridges run
        self.config_error = config_error
        if config_error is None:
            try:
                config.validate()
            except ConfigError as exc:
                self.config_error = str(exc)
        self.config = config
        self.name = config.name
        self.outgoing = outgoing
        #: maps `vm://` to the hosting broker's own connector
        self.resolve_uri = resolve_uri or (lambda uri: uri)
        self.state = BridgeState.STOPPED
        self.state_since = _now_ms()
        self.last_error: str | None = None
        self.forwarded = 0  # sent and accepted by the target
        self.acknowledged = 0  # acknowledged on the source
        self.batches = 0
        self.failures = 0
        self.retries = 0
        self.lost = 0  # AT_MOST_ONCE messages acknowledged but not accepted by the target
        self.skipped = 0  # redelivered, already on the target (marker, AT_MOST_ONCE), not resent
        #: exactly-once through a transaction and a marker (targets without duplicate detection)
        self.ledger: MarkerLedger | None = None
        self._session: Any = None
        self._in_doubt: set[str] = set()
        #: AT_MOST_ONCE: what was sent lately, not to be sent again when a source
        #: that lost its acknowledgements (kill -9) delivers it again
        self._recent = RecentIds(max(10_000, 20 * config.max_batch_size))
        self.source: OutgoingConnection | None = None
        self.target: OutgoingConnection | None = None
        self._sender: SenderLink | None = None
        self._receiver: ReceiverLink | None = None
        self._buffer: list[Delivery] = []
        self._first_at = 0.0
        self._wake = asyncio.Event()
        self._failure: str | None = None
        self._refused = False  # the last failure: the target refused a batch
        self._paused = False
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._done = asyncio.Event()
        if self.config_error is not None:
            self.state = BridgeState.FAILED
            self.last_error = f"invalid configuration: {self.config_error}"

    # -- what management sees ------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        c = self.config
        return {
            "name": self.name, "state": self.state.value, "state_since": self.state_since,
            "quality_of_service": c.quality_of_service.value,
            "source": f"{c.source_uri} {c.source_destination}",
            "target": f"{c.target_uri} {c.target_destination}",
            "forwarded": self.forwarded, "acknowledged": self.acknowledged,
            "batches": self.batches, "failures": self.failures, "retries": self.retries,
            "lost": self.lost, "skipped": self.skipped, "pending": len(self._buffer),
            "last_error": self.last_error,
            "exactly_once_by": ("marker" if self.ledger is not None else "duplicate detection")
            if c.quality_of_service is QualityOfService.ONCE_AND_ONLY_ONCE else None,
            "source_connection": self.source.state.value if self.source else None,
            "target_connection": self.target.state.value if self.target else None,
        }

    def _set_state(self, state: BridgeState) -> None:
        if state is not self.state:
            self.state = state
            self.state_since = _now_ms()

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Start forwarding (in the background; failures are retried)."""
        if self._task is not None and not self._task.done():
            return
        if self.config_error is not None:
            log.error("bridge %s is not started: %s", self.name, self.last_error)
            self._set_state(BridgeState.FAILED)
            self._done.set()
            return
        self._stopping = False
        self._done.clear()
        self._set_state(BridgeState.STARTING)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"bridge {self.name}")

    async def stop(self) -> None:
        self._stopping = True
        self._fail("the bridge is stopping")
        self._resumed.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._task = None
        await self._teardown()
        if self.state is not BridgeState.FAILED:
            self._set_state(BridgeState.STOPPED)

    def pause(self) -> None:
        """Stop forwarding; consumed messages wait (unacknowledged) for `resume`."""
        self._paused = True
        self._resumed.clear()
        if self.state is BridgeState.RUNNING:
            self._set_state(BridgeState.PAUSED)

    def resume(self) -> None:
        self._paused = False
        self._resumed.set()
        if self.state is BridgeState.PAUSED:
            self._set_state(BridgeState.RUNNING)

    async def wait_stopped(self) -> None:
        await self._done.wait()

    async def _run(self) -> None:
        attempts = refused_attempts = 0
        try:
            while not self._stopping:
                progress = self.forwarded + self.skipped
                self._refused = False
                try:
                    await self._setup()
                    # connected: a later failure starts a new count, unless it is the
                    # target refusing what it is sent before anything got through (that
                    # does not heal by connecting again: max-retries applies to it)
                    attempts = 0
                    self._set_state(BridgeState.PAUSED if self._paused else BridgeState.RUNNING)
                    log.info("bridge %s: forwarding %s %s -> %s %s (%s)", self.name,
                             self.config.source_uri, self.config.source_destination,
                             self.config.target_uri, self.config.target_destination,
                             self.config.quality_of_service.value)
                    await self._forward_loop()
                except asyncio.CancelledError:
                    raise
                except Unfit as unfit:
                    self.last_error = str(unfit)
                    await self._teardown()
                    self._set_state(BridgeState.FAILED)
                    log.error("bridge %s will not run: %s", self.name, self.last_error)
                    return
                except Exception as exc:  # noqa: BLE001 - every failure is retried by policy
                    if self._stopping:
                        break
                    self.failures += 1
                    self.last_error = str(exc) or type(exc).__name__
                    log.warning("bridge %s failed: %s", self.name, self.last_error)
                await self._teardown()
                if self._stopping:
                    break
                if self._refused and self.forwarded + self.skipped == progress:
                    attempts = refused_attempts
                attempts += 1
                refused_attempts = attempts if self._refused else 0
                if 0 <= self.config.max_retries < attempts:
                    self._set_state(BridgeState.FAILED)
                    log.error("bridge %s stopped after %d failed attempt(s): %s", self.name,
                              attempts, self.last_error)
                    return
                self.retries += 1
                self._set_state(BridgeState.RETRYING)
                await asyncio.sleep(self.config.failure_retry_interval / 1000.0)
        finally:
            self._done.set()

    # -- connecting ----------------------------------------------------------------------
    def _options(self, side: str) -> ConnectOptions:
        c = self.config
        user, password = (c.source_user, c.source_password) if side == "source" else \
            (c.target_user, c.target_password)
        return ConnectOptions(name=f"bridge {self.name} {side}", user=user, password=password,
                              client_id=c.client_id if side == "source" else None,
                              retry_interval=c.failure_retry_interval / 1000.0,
                              reconnect_attempts=0, owner=f"bridge {self.name}")

    async def _connect(self, side: str, uri: str) -> OutgoingConnection:
        conn = self.outgoing.open(self.resolve_uri(uri), self._options(side))
        if side == "source":
            self.source = conn
        else:
            self.target = conn
        conn.add_listener(lambda c, s: self._connection_changed(side, c, s))
        await conn.connect()
        return conn

    def _connection_changed(self, side: str, conn: OutgoingConnection, state: ConnectionState) -> None:
        if state is not ConnectionState.OPEN and state is not ConnectionState.CONNECTING:
            self._fail(f"{side} connection {state.value}: {conn.last_error or 'closed'}")

    async def _setup(self) -> None:
        self._failure = None
        self._buffer = []
        c = self.config
        target = await self._connect("target", c.target_uri)
        self._session = await target.session()
        marker = c.quality_of_service is QualityOfService.ONCE_AND_ONLY_ONCE and not self._dedupes(target)
        if marker and not hasattr(self._session, "begin"):
            # checked before anything is consumed or declared: no partial run
            raise TargetUnfit(self._no_exactly_once(target))
        source = await self._connect("source", c.source_uri)
        self._sender = await self._session.open_sender(c.target_destination)
        self.ledger = None
        if marker:
            ledger = MarkerLedger(self._session, marker_destination(self.name),
                                  c.send_timeout / 1000.0, window_size(c.max_batch_size))
            self._in_doubt = await ledger.recover()
            self.ledger = ledger
        credit = max(2 * c.max_batch_size, 10)
        self._receiver = await (await source.session()).open_receiver(
            c.source_destination, self._on_delivery, credit=credit, selector=c.selector,
            subscription_name=c.subscription_name)
        if c.selector:
            why = selector_ignored(source, self._receiver)
            if why is not None:
                raise SourceUnfit(f"{why}; the bridge would forward every message, not only those "
                                  f"matching selector {c.selector!r}")

    def _dedupes(self, target: OutgoingConnection) -> bool:
        setting = self.config.target_duplicate_detection
        if setting != "auto":
            return setting == "true"
        product = peer_product(target)
        # Artemis says ActiveMQ-Artemis/... (STOMP), apache-activemq-artemis (AMQP)
        return product.split("/", 1)[0] not in WITHOUT_DUPLICATE_DETECTION

    def _no_exactly_once(self, target: OutgoingConnection) -> str:
        c = self.config
        who = peer_product(target) or "the peer"
        why = ('target-duplicate-detection="false"' if c.target_duplicate_detection == "false"
               else "it ignores _AMQ_DUPL_ID")
        return (f"ONCE_AND_ONLY_ONCE cannot be kept: the target ({who}) does not drop "
                f"duplicates ({why}) and the bridge has no transaction over this connection "
                f"(AMQP) to commit a batch with its marker, so a batch in doubt after a "
                f"failure would arrive twice. Use quality-of-service=\"DUPLICATES_OK\" "
                f"(at least once), a stomp:// target-uri (exactly once by a STOMP "
                f"transaction and a marker), or target-duplicate-detection=\"true\" when "
                f"the target or its consumers drop repeats by _AMQ_DUPL_ID")

    async def _teardown(self) -> None:
        self._buffer = []
        for conn in (self.source, self.target):
            if conn is not None:
                try:
                    await conn.close()
                except Exception:  # noqa: BLE001
                    log.exception("bridge %s: closing a connection failed", self.name)
        self._sender = None
        self._receiver = None

    def _fail(self, reason: str) -> None:
        if self._failure is None:
            self._failure = reason
        self._wake.set()

    # -- forwarding ----------------------------------------------------------------------
    def _on_delivery(self, delivery: Delivery) -> None:
        buf = self._buffer
        if not buf:
            self._first_at = time.monotonic()
        buf.append(delivery)
        if len(buf) >= self.config.max_batch_size or len(buf) == 1:
            self._wake.set()

    async def _forward_loop(self) -> None:
        c = self.config
        size = c.max_batch_size
        max_wait = c.max_batch_time / 1000.0 if c.max_batch_time > 0 else None
        while True:
            if self._failure is not None:
                raise BridgeFailure(self._failure)
            if self._paused:
                await self._resumed.wait()
                continue
            buf = self._buffer
            ready = len(buf) >= size
            if not ready and buf and max_wait is not None:
                left = self._first_at + max_wait - time.monotonic()
                ready = left <= 0
            if not ready:
                self._wake.clear()
                timeout = None
                if buf and max_wait is not None:
                    timeout = max(self._first_at + max_wait - time.monotonic(), 0.0)
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except TimeoutError:
                    pass
                continue
            batch = buf[:size]
            del buf[:size]
            if buf:
                self._first_at = time.monotonic()
            await self._forward(batch)

    async def _forward(self, batch: list[Delivery]) -> None:
        sender = self._sender
        if sender is None:
            raise BridgeFailure("no target link")
        qos = self.config.quality_of_service
        ledger = self.ledger
        tx = None
        if ledger is not None:
            sids = [stable_id(d.message) for d in batch]
            ids = [f"{self.name}:{sid or content_digest(d.message)}"
                   for d, sid in zip(batch, sids, strict=True)]
            # a message the marker lists was committed on the target before a failure
            # (only its acknowledgement was lost): a source killed before it stored
            # the acknowledgement delivers it again, not always flagged redelivered.
            # One without an id is known by its content only: skipped only when
            # the source says it delivered it before.
            seen = [listed(i, self._in_doubt) and (sid is not None or d.redelivered)
                    for d, sid, i in zip(batch, sids, ids, strict=True)]
            if any(seen):
                for d, s in zip(batch, seen, strict=True):
                    if s:
                        d.accept()
                self.acknowledged += sum(seen)
                self.skipped += sum(seen)
                batch = [d for d, s in zip(batch, seen, strict=True) if not s]
                ids = [i for i, s in zip(ids, seen, strict=True) if not s]
                if not batch:
                    return
        if qos is QualityOfService.AT_MOST_ONCE:
            batch = self._not_sent_lately(batch)
            if not batch:
                return
        messages = [self._prepare(d.message) for d in batch]
        if qos is QualityOfService.AT_MOST_ONCE:
            for d in batch:
                d.accept()
            self.acknowledged += len(batch)
            # let the source connection write the acknowledgements (AMQP writes its
            # dispositions on the next loop turn) before the target gets a byte: a bridge
            # killed after sending must not leave the source without them
            await asyncio.sleep(0)
        if ledger is not None:
            tx = await self._session.begin()
            futures = [sender.send(m, transaction=tx) for m in messages]  # type: ignore[call-arg]
            futures.append(ledger.sender.send(ledger.marker(ids), transaction=tx))
        else:
            futures = [sender.send(m) for m in messages]
        _, pending = await asyncio.wait(futures, timeout=self.config.send_timeout / 1000.0)
        if pending:
            if qos is QualityOfService.AT_MOST_ONCE:
                self.lost += len(pending)
            raise BridgeFailure(f"the target settled {len(futures) - len(pending)} of {len(futures)} "
                                f"message(s) within send-timeout ({self.config.send_timeout} ms)")
        results: list[Any] = [f.exception() or f.result() for f in futures]
        if tx is not None:
            if all(not isinstance(r, BaseException) and r.accepted for r in results):
                await asyncio.wait_for(self._session.commit(tx), self.config.send_timeout / 1000.0)
                if ledger is not None:
                    ledger.committed_now()
            results = results[:-1]  # the marker
        refused = [r for r in results if isinstance(r, BaseException) or not r.accepted]
        accepted = len(results) - len(refused)
        self.forwarded += accepted
        self.batches += 1
        if qos is QualityOfService.AT_MOST_ONCE:
            if refused:
                self.lost += len(refused)
                self._refused = True
                raise BridgeFailure(f"{len(refused)} message(s) of a batch were not accepted by "
                                    f"the target and are lost (AT_MOST_ONCE): {_why(refused[0])}")
            return
        if refused:
            self._refused = True
            raise BridgeFailure(f"the target did not accept {len(refused)} of {len(results)} "
                                f"message(s): {_why(refused[0])}; the batch will be sent again")
        if self._failure is not None:
            raise BridgeFailure(self._failure)  # the source is gone: its acks would be lost
        for d in batch:
            d.accept()
        self.acknowledged += len(batch)

    def _prepare(self, message: Message) -> Message:
        c = self.config
        changes: dict[str, Any] = {}
        if c.quality_of_service is QualityOfService.ONCE_AND_ONLY_ONCE:
            sid = stable_id(message)
            if sid is not None:  # a message without any id is not one the target can drop
                changes[DUPLICATE_ID] = f"{self.name}:{sid}"
        if c.add_message_id_in_header and message.message_id:
            before = message.properties.get(MESSAGE_ID_LIST)
            changes[MESSAGE_ID_LIST] = f"{before},{message.message_id}" if before else message.message_id
        if not changes:
            return message
        return message.copy(properties={**message.properties, **changes})

    def _not_sent_lately(self, batch: list[Delivery]) -> list[Delivery]:
        """AT_MOST_ONCE: acknowledge, without sending, a message that was sent lately
        (one without an id only when the source flags it redelivered: others with
        the same content are new messages)."""
        recent = self._recent
        keep: list[Delivery] = []
        for d in batch:
            own = stable_id(d.message)
            sid = own or content_digest(d.message)
            if sid in recent and (own is not None or d.redelivered):
                d.accept()
                self.acknowledged += 1
                self.skipped += 1
            else:
                recent.add(sid)
                keep.append(d)
        return keep


def stable_id(message: Message) -> str | None:
    """What identifies a source message across redeliveries: its own duplicate
    id, else its message id with its timestamp when it has one (a business id
    sent again later is another message); None for a message with neither (an
    AMQP client's default), which only `content_digest` tells apart from others."""
    props = message.properties
    own = props.get(DUPLICATE_ID)
    if isinstance(own, (str, bytes)) and own:
        return own if isinstance(own, str) else own.hex()
    if message.message_id:
        if message.timestamp:
            return f"{message.message_id}@{message.timestamp}"
        return message.message_id
    return None


def content_digest(message: Message) -> str:
    """A digest of what a message without an id carries: the same for a
    redelivery of it, and for every other message with the same body, properties
    and timestamp (so it only names a redelivered message, never a new one)."""
    props = message.properties
    h = hashlib.sha256()
    h.update(bytes(message.body))
    h.update(repr(sorted((str(k), str(v)) for k, v in props.items())).encode())
    h.update(str(message.timestamp).encode())
    return "sha256:" + h.hexdigest()


def _why(r: Any) -> str:
    if isinstance(r, BaseException):
        return str(r) or type(r).__name__
    return f"{r.state}{': ' + r.description if r.description else ''}"


def _now_ms() -> int:
    return int(time.time() * 1000)
