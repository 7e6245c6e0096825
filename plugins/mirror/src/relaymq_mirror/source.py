"""The source side: ``<mirror>`` in ``<amqp-connection>`` (an entry point of
``relaymq.connection_operations``).

Every change the broker commits is captured, in the same store write, by the
durable change-feed cursor ``$ACTIVEMQ_ARTEMIS_MIRROR_<connection name>``
(the store-and-forward queue). A link to the target sends the events in
order as Artemis encodes them, up to `window` unsettled; the cursor is
acknowledged up to the last event the target accepted, so a target that is
down for hours loses nothing and the backlog drains in order when it returns.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict, deque
from typing import Any, Final

from relaymq.broker.scheduler import CRON, PERIOD, REPEAT, SCHEDULED_FIRING, SCHEDULING_PROPERTIES
from relaymq.config.model import PluginElement
from relaymq.config.report import Report
from relaymq.feed import (
    DestinationCreated,
    DestinationDeleted,
    MessageAdded,
    MessageRemoved,
    SubscriptionCreated,
    SubscriptionDeleted,
)
from relaymq.outgoing.node import node_id
from relaymq.spi.outgoing import AuthenticationFailed
from relaymq_amqp import engine as pn
from relaymq_amqp.mapping import ENCODING, from_kernel

from relaymq_mirror import batch, wire
from relaymq_mirror.config import AddressFilter, MirrorConfig, mirror_config
from relaymq_mirror.outbox import Outbox
from relaymq_mirror.state import Applied, applied
from relaymq_mirror.sync import SyncWaiters

log = logging.getLogger("relaymq.mirror")

LAG_SAMPLES: Final = 2048
#: events sent before the pump gives the loop a turn (socket writes, settlements)
YIELD_EVERY: Final = 200
#: outcomes after which an event is sent again on the next link (the target drops
#: repeats): released, modified, and a settlement without an outcome (a target
#: that settles what it has not applied as its link closes has not stored it)
AGAIN: Final = frozenset({"released", "modified", "settled"})
#: routes kept per destination (`MirrorSource._send_routes`, `_ack_routes`); past
#: this many they are all dropped and made again as events need them
ROUTES_KEPT: Final = 4096
#: the acknowledgement route of a queue that is not for the target
_NOT_SENT: Final = ("", "", b"")


def _scheduled(msg: Any) -> bytes:
    """A message the scheduler took to deliver once, as Artemis mirrors it when it is
    sent: the producer's message with `x-opt-delivery-time` (the absolute due time the
    announcement carries in `scheduled_delay`, so a delay is not counted again on the
    target) and no other scheduling field, so the target's scheduler holds it until then.
    A repeating job goes the same way, with its period and the deliveries still to come
    as `AMQ_SCHEDULED_PERIOD` and `AMQ_SCHEDULED_REPEAT` (its first due time is
    `x-opt-delivery-time`); a cron job with its `AMQ_SCHEDULED_CRON` entry and its delay
    after each cron time as `x-opt-delivery-delay`. The target's scheduler holds either
    job and fires its own copies (the source does not send its copies)."""
    ann = {k: v for k, v in (msg.annotations or {}).items()
           if k not in ("delivery_time", "delivery_delay")}
    cron = msg.scheduled_repeat < 0  # a cron job: the target holds the job itself
    period = msg.scheduled_period
    if not cron:
        ann["delivery_time"] = msg.scheduled_delay
    elif period > 0:
        ann["delivery_delay"] = period  # the delay after each cron time
    copy = msg.copy(annotations=ann)
    repeat = copy.scheduled_repeat
    copy.scheduled_delay = copy.scheduled_period = copy.scheduled_repeat = 0
    props = copy.properties
    if props and not props.keys().isdisjoint(SCHEDULING_PROPERTIES):
        copy.properties = props = {k: v for k, v in props.items()
                                   if k not in SCHEDULING_PROPERTIES or (cron and k == CRON)}
    if period > 0 and not cron:  # a repeating job: the target holds the job itself
        copy.properties = {**(props or {}), PERIOD: period, REPEAT: repeat}
    return from_kernel(copy)


class LinkRefusal(Exception):
    """The target answered the mirror link in a way a mirror cannot use."""


class MirrorSource:
    """One ``<mirror>``: capture, store and forward this broker's changes."""

    def __init__(self, config: MirrorConfig, broker: Any) -> None:
        self.config = config
        self.broker = broker
        self.filter = AddressFilter.parse(config.address_filter)
        self.node = ""
        self.conn: Any = None
        self.name = ""
        self.snf = ""
        self.cursor: Any = None
        self.remote_id: str | None = None
        self.peer_relaymq = False
        self.state = "stopped"
        self.last_error: str | None = None
        self.sent = 0
        self.transfers = 0
        self.accepted = 0
        self.rejected = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        #: the target reads batches (`batch.PROPERTY`): a run's events go in one transfer
        self.batching = False
        #: the reason of the target's last close of the link, logged once while the
        #: same one repeats (a target whose disk refuses writes closes every link)
        self._closed_reason: str | None = None
        self._outbox: Outbox | None = None  # the current link's
        #: cursor position -> encoded messages of that event, not yet all accepted
        self._unacked: OrderedDict[int, list[bytes]] = OrderedDict()
        self._outstanding: dict[int, int] = {}
        self._stamps: dict[int, int] = {}  # position -> message timestamp (lag)
        self._lags: deque[float] = deque(maxlen=LAG_SAMPLES)
        self._read_upto = 0  # every event up to here was read (and encoded or skipped)
        self._acked = 0  # the cursor is acknowledged up to here
        self._recovered_upto = 0  # see `start`
        self._ack_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._lost: asyncio.Future[None] | None = None
        self.waiters = SyncWaiters()
        self._applied: Applied | None = None
        #: what the pump writes for each event, made once per destination instead of
        #: per event (the address filter, the rendered address, the encoded
        #: annotations): (destination key, origin broker) -> the mirror's delivery
        #: annotations around a send's internal id, empty when not for the target
        self._send_routes: dict[tuple[str, str | None], tuple[bytes, bytes]] = {}
        #: (destination key, queue key) -> (address, queue, the bytes of a plain
        #: postAck before its id), `_NOT_SENT` when not for the target
        self._ack_routes: dict[tuple[str, str], tuple[str, str, bytes]] = {}

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any) -> MirrorSource:
        return cls(mirror_config(element, bool(getattr(broker, "strict", False))), broker)

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        """`relaymq config check` (and `run`, before anything starts): the warnings."""
        report = Report(strict=strict, quiet=True)  # returned: the caller reports them
        mirror_config(element, strict, report)
        report.raise_if_errors()
        return report.warnings

    # -- what the cursor captures ------------------------------------------------------
    def kinds(self) -> set[type[Any]]:
        c = self.config
        kinds: set[type[Any]] = {MessageAdded}
        if c.message_acknowledgements:
            kinds.add(MessageRemoved)
        if c.queue_creation:
            kinds |= {DestinationCreated, SubscriptionCreated}
        if c.queue_removal:
            kinds |= {DestinationDeleted, SubscriptionDeleted}
        return kinds

    # -- ConnectionOperation ---------------------------------------------------------------
    async def start(self, connection: Any) -> None:
        self.conn = connection
        self.node = node_id(self.broker)
        self.name = getattr(connection.options, "name", None) or connection.name
        self.snf = f"{wire.MIRROR_ADDRESS}_{self.name}"
        self.cursor = await self.broker.change_feed.subscribe_durable(self.snf, self.kinds())
        # a message consumed here before its send went out is sent neither, nor its
        # acknowledgement (the target would add and remove it); `sync` keeps every
        # event, its clients wait for the target to have them
        self.cursor.cancel_pairs = not self.config.sync
        # a send's record is the message its queue stores (one copy in the store),
        # where the message itself says everything the pump reads back
        self.cursor.share_messages = True
        # an event goes to the target as soon as it is captured, while the local
        # store write that holds it (and its sync) is under way: the two brokers'
        # syncs overlap instead of following each other. The cursor forgets an
        # event only once the target accepted it *and* it is stored here
        # (`_ack`): a kill -9 in between resends it (the target drops repeats)
        self.cursor.read_early = True
        self.cursor.on_stored = self._stored
        self._read_upto = self._acked = self.cursor.position
        # the cursor's events captured before this process (fixed once it is open),
        # read as a native int on the per-event path
        self._recovered_upto = int(self.cursor.recovered_upto)
        self._stopping = False
        self._wake = asyncio.Event()
        self._set_state("connecting")
        connection.add_listener(self._connection_state)
        # the connection may have been retrying before this mirror started (its
        # listener hears only changes): the state it is in now counts too
        self._connection_state(connection, connection.state)
        if self.config.sync:
            self.waiters.install(self.broker, self)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stopping = True
        self.waiters.uninstall(self.broker)
        for task in (self._task, self._ack_task):
            if task is not None:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):  # noqa: BLE001
                    pass
        self._task = self._ack_task = None
        if self.cursor is not None:
            self.cursor.on_stored = None
            self.cursor.read_early = False
            self.cursor.close()
        self._set_state("stopped")

    async def sync(self) -> dict[str, Any]:
        """Copy the current state to the target (``relaymq mirror sync NAME``)."""
        from relaymq_mirror.snapshot import snapshot

        return await snapshot(self)

    def status(self) -> dict[str, Any]:
        lags = sorted(self._lags)
        p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else None
        cursor = self.cursor
        out = self._outbox
        # read and still in the SnF store: sent and not accepted yet, or accepted
        # and not yet forgotten (stored here later than the target accepted it,
        # its removal being written); a kill -9 now sends those again
        depth = (cursor.pending + max(cursor.unacknowledged, len(self._unacked))
                 if cursor is not None else len(self._unacked))
        return {"snf_queue": self.snf, "state": self.state, "target_node": self.remote_id,
                "snf_depth": depth, "unsettled": len(self._unacked),
                "sent": self.sent + (out.sent if out is not None else 0),
                "transfers": self.transfers + (out.transfers if out is not None else 0),
                "batching": self.batching, "accepted": self.accepted, "rejected": self.rejected,
                "dropped_unsent_pairs": getattr(self.cursor, "cancelled", 0),
                "lag_ms": self._lags[-1] if self._lags else None,
                "lag_p99_ms": p99, "sync": self.config.sync,
                "last_error": self.last_error or (
                    f"the target closed the link: {self._closed_reason}"
                    if self._closed_reason is not None else None)}

    # -- state and logging -------------------------------------------------------------------
    def _set_state(self, state: str, error: str | None = None) -> None:
        if state == self.state and error == self.last_error:
            return
        self.state = state
        if error is not None:
            self.last_error = error
        elif state == "connected":
            self.last_error = None  # working again: the last failure is over
        if error:
            log.warning("mirror %s: %s: %s", self.name, state, error)
        else:
            log.info("mirror %s: %s", self.name, state)

    def _connection_state(self, conn: Any, state: Any) -> None:
        value = getattr(state, "value", str(state))
        if value in ("retrying", "failed"):
            refused = isinstance(getattr(conn, "last_failure", None), AuthenticationFailed)
            what = "authentication refused" if refused else "target unreachable"
            self._set_state(f"{what} ({value})", conn.last_error or "no answer")
            lost = self._lost
            if lost is not None and not lost.done():
                lost.set_result(None)

    # -- the link ------------------------------------------------------------------------------
    async def _run(self) -> None:
        retry = max(getattr(self.conn.options, "retry_interval", 5.0), 0.05)
        while not self._stopping:
            try:
                await self.conn.wait_open()
            except Exception as exc:  # noqa: BLE001 - FAILED: the policy gave up
                self._set_state("failed", str(exc))
                return
            sender = None
            try:
                sender = await self._open_link()
                self._set_state("connected")
                await self._pump(sender)
            except LinkRefusal as exc:
                self._set_state("refused by the target", str(exc))
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 - link refused or lost: try again
                self._set_state("link lost", f"{type(err).__name__}: {err}")
            finally:
                if sender is not None:
                    try:
                        await sender.close()
                    except Exception:  # noqa: BLE001
                        pass
            if not self._stopping:
                await asyncio.sleep(retry)

    async def _open_link(self) -> Any:
        conn = self.conn
        session = await conn.session()
        try:
            sender = await session.open_sender(
                self.snf, name=f"{self.snf}:{uuid.uuid4()}", source_address=self.snf,
                properties={wire.BROKER_ID: self.node},
                desired_capabilities=[wire.MIRROR_CAPABILITY])
        except (ConnectionError, TimeoutError) as exc:
            condition = getattr(exc, "condition", None)
            raise LinkRefusal(str(condition or exc)) from None
        caps = getattr(sender, "remote_offered_capabilities", [])
        remote = (getattr(sender, "remote_properties", None) or {}).get(wire.BROKER_ID)
        problem = None
        if wire.MIRROR_CAPABILITY not in caps:
            problem = f"the target does not offer {wire.MIRROR_CAPABILITY}: it cannot be mirrored to"
        elif not isinstance(remote, str) or not remote:
            problem = f"the target's link has no {wire.BROKER_ID} (missingBrokerID)"
        elif remote == self.node:
            problem = "the target is this broker itself (brokerConnectionMirrorItself)"
        if problem is not None:
            await sender.close()
            raise LinkRefusal(problem)
        self.remote_id = str(remote)
        raw_link = getattr(sender, "link", None)
        if raw_link is not None and hasattr(raw_link, "on_remote_close"):
            raw_link.on_remote_close = self._link_closed  # logged here, once per reason
        props = sender.remote_properties or {}
        self.batching = props.get(batch.PROPERTY) is True and self.config.batch
        self.peer_relaymq = props.get(wire.PREFIXED_ADDRESSES) is True
        self._forget_routes()  # a new target may read addresses another way
        return sender

    @staticmethod
    def _batch_limit(raw_link: Any) -> int:
        """Bytes of events one transfer may carry on `raw_link` (its target's
        max-message-size, when it set one, bounds it)."""
        link = getattr(raw_link, "pn", None)
        remote_max = pn.link_remote_max_message_size(link) if link is not None else 0
        return batch.limit(int(remote_max))

    def _link_closed(self, condition: Any) -> None:
        """The target closed the mirror link: what it had not accepted goes again on
        the next link. Logged once per reason while the same one repeats (again once
        the target accepted events in between)."""
        reason = str(condition) if condition is not None else "no reason given"
        if reason == self._closed_reason:
            log.debug("mirror %s: the target closed the link again: %s", self.name, reason)
            return
        self._closed_reason = reason
        log.warning("mirror %s: the target closed the link: %s; what it had not accepted is "
                    "sent again on the next link", self.name, reason)

    def _forget_routes(self) -> None:
        self._send_routes.clear()
        self._ack_routes.clear()

    async def _pump(self, sender: Any) -> None:
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()
        self._lost = lost
        window = max(self.config.window, 1)
        wake = self._wake
        assert wake is not None

        raw_link = getattr(sender, "link", None)
        raw_send = getattr(raw_link, "send", None)  # the AMQP link: bytes in, no wrapper
        # bytes in, a callback out: no future and no loop callback per transfer
        raw_send_with = getattr(raw_link, "send_with", None)

        def transmit(data: bytes, settled: Any) -> None:
            if raw_send_with is not None:
                raw_send_with(data, settled)
            elif raw_send is not None:
                def done(f: asyncio.Future[Any]) -> None:
                    if f.cancelled():
                        settled(ConnectionError("cancelled"))
                    else:
                        exc = f.exception()
                        settled(exc if exc is not None else f.result())
                raw_send(data).add_done_callback(done)
            else:
                sender.send(wire.raw_message(data), on_settled=settled)

        def after(result: Any) -> None:
            if not lost.done() and (isinstance(result, BaseException) or (
                    result.state in AGAIN)):
                lost.set_result(None)

        out = Outbox(transmit, self._settled, self._settled_run, after, self.batching,
                     self._batch_limit(raw_link))
        self._outbox = out
        send = out.add
        for position, msgs in list(self._unacked.items()):  # what the last link left unsettled
            if len(msgs) > 1:
                self._outstanding[position] = len(msgs)
            else:
                self._outstanding.pop(position, None)
            for data in msgs:
                send(position, data)
        out.flush()
        getter: asyncio.Task[Any] | None = None
        try:
            while not lost.done() and not self._stopping:
                room = window - len(self._unacked)
                if room <= 0:
                    wake.clear()
                    waker: asyncio.Future[Any] = loop.create_task(wake.wait())
                    await asyncio.wait([lost, waker], return_when=asyncio.FIRST_COMPLETED)
                    waker.cancel()
                    continue
                cursor = self.cursor
                batch = cursor.take(min(room, YIELD_EVERY)) if getter is None else []
                if batch:
                    # the events in memory now, a batch at a time: no await per event
                    for position, event in batch:
                        try:
                            self._forward(position, event, send)
                        except Exception:  # noqa: BLE001 - one bad event, not the batch
                            log.exception("mirror %s: event %d cannot be sent; skipped",
                                          self.name, position)
                    out.flush()
                    self._passed(cursor.position)
                    # give the loop a turn, so what is encoded so far goes out (and
                    # settlements come back) while more is read
                    await asyncio.sleep(0)
                    continue
                if getter is None:
                    self._passed(cursor.position)
                    getter = loop.create_task(cursor.get())
                await asyncio.wait([getter, lost], return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    continue
                event = getter.result()
                getter = None
                self._forward(cursor.position, event, send)
                out.flush()
        finally:
            if getter is not None:
                if getter.done() and not getter.cancelled() and getter.exception() is None:
                    # read but not handled: handle it on the next link
                    event = getter.result()
                    position = self.cursor.position
                    msgs = self._encode_at(position, event)
                    self._read_upto = position
                    if msgs:
                        self._unacked[position] = msgs
                else:
                    getter.cancel()
            self._lost = None
            self.sent += out.sent
            self.transfers += out.transfers
            self._outbox = None

    def _forward(self, position: int, event: Any, send: Any) -> None:
        """Send the event at cursor `position` (or note it handled, when it is not
        for the target)."""
        msgs = self._encode_at(position, event)
        self._read_upto = position
        if not msgs:
            self._schedule_ack()
            return
        self._unacked[position] = msgs
        if len(msgs) > 1:  # one message (a send, an acknowledgement): 1, by default
            self._outstanding[position] = len(msgs)
        if type(event) is MessageAdded:
            self._stamps[position] = event.message.timestamp
        for data in msgs:
            send(position, data)

    def _passed(self, position: int) -> None:
        """Every event up to cursor `position` was handed out (and is forwarded) or
        dropped by the cursor unread (a send consumed before it went out, and its
        acknowledgement): the cursor may be acknowledged that far."""
        if position > self._read_upto:
            self._read_upto = position
            if not self._unacked:
                self._schedule_ack()

    def _settled(self, position: int, result: Any) -> None:
        if isinstance(result, BaseException) or position not in self._unacked:
            return
        state = result.state
        if state in AGAIN:
            return  # sent again on the next link
        if state != "accepted":
            self.rejected += 1
            log.warning("mirror %s: the target refused event %d: %s", self.name, position,
                        getattr(result, "description", None) or getattr(result, "condition", None)
                        or state)
        self._settled_run([position])

    def _settled_run(self, positions: list[int]) -> None:
        """The target settled the messages of the events at `positions` for good
        (one, or a batch it accepted whole): an event whose every message is
        settled is done; the pump is woken, the cursor's acknowledgement scheduled
        and the clock for the lag read once for them all."""
        unacked = self._unacked
        outstanding = self._outstanding
        stamps = self._stamps
        done = 0
        now = 0.0
        for position in positions:
            if position not in unacked:
                continue
            if outstanding:
                left = outstanding.get(position, 1) - 1
                if left > 0:
                    outstanding[position] = left
                    continue
                outstanding.pop(position, None)
            del unacked[position]
            done += 1
            stamp = stamps.pop(position, 0)
            if stamp:
                if not now:
                    now = time.time() * 1000
                self._lags.append(max(now - stamp, 0.0))
        if done:
            self.accepted += done
            self._closed_reason = None  # the link works: a later close is news again
            wake = self._wake
            if wake is not None:
                wake.set()
            self._schedule_ack()

    def safe_position(self) -> int:
        """The cursor position up to which the target accepted everything."""
        first = next(iter(self._unacked), None)
        return self._read_upto if first is None else first - 1

    def _stored(self, upto: int) -> None:
        """The cursor's events up to `upto` are in the local store: those the
        target accepted meanwhile may be forgotten now."""
        if self._acked < upto and self._acked < self.safe_position():
            self._schedule_ack()

    def _schedule_ack(self) -> None:
        if self._ack_task is None or self._ack_task.done():
            self._ack_task = asyncio.get_running_loop().create_task(self._ack())

    async def _ack(self) -> None:
        while True:
            # accepted by the target and stored here (read early, an event may be
            # accepted before its local write completed)
            upto = min(self.safe_position(), self.cursor.stored_upto)
            if upto <= self._acked:
                return
            await self.cursor.ack(upto)
            self._acked = upto
            self.waiters.reached(upto)

    # -- events -> Artemis messages --------------------------------------------------------------
    def _render(self, dest: Any) -> str:
        """An address as the target reads it: ``queue://X`` for a RelayMQ target, the
        bare name (an Artemis address) otherwise."""
        return dest.key if self.peer_relaymq else dest.name

    def _wanted(self, dest: Any) -> bool:
        name = dest.name
        return not (dest.is_temporary or name.startswith("$ACTIVEMQ_ARTEMIS")
                    or name.startswith("ActiveMQ.Advisory.")) and self.filter.matches(name)

    def _from_target(self, *origins: str | None) -> bool:
        remote = self.remote_id
        return remote is not None and remote in origins

    def _encode_at(self, position: int, ev: Any) -> list[bytes]:
        """`encode`, except a non-persistent message's send captured before this
        process started: the message went with the restart (it lived in memory
        only), so the target does not get it either (as Artemis' SnF queue loses
        non-durable messages with the broker)."""
        if (position <= self._recovered_upto and type(ev) is MessageAdded
                and not ev.message.durable):
            return []
        return self.encode(ev)

    def encode(self, ev: Any) -> list[bytes]:
        cls = type(ev)
        if cls is MessageAdded:
            dest = ev.destination
            msg = ev.message
            morigin = msg.origin
            remote = self.remote_id
            if remote is not None and (remote == ev.origin or remote == morigin):
                return []  # from the target: not sent back
            origin = morigin if morigin != self.node else None
            rkey = (dest.key, origin)
            route = self._send_routes.get(rkey)
            if route is None:
                route = self._send_route(dest, origin)
            if not route[0]:
                return []  # not for the target
            ann = msg.annotations
            if ann is not None and SCHEDULED_FIRING in ann:
                return []  # a cron job's copy: the target fires its own (the job went)
            if msg.scheduled_delay > 0 and not ev.placements:
                data = _scheduled(msg)  # a job taken by the scheduler, not due yet
            else:
                encoded = msg.encoded
                data = encoded if encoded is not None and msg.encoding == ENCODING \
                    else from_kernel(msg)
            return [wire.with_annotations(data, wire.id_of(msg), route[0], route[1])]
        if cls is MessageRemoved:
            return self._ack_event(ev)
        # destinations and subscriptions change what a route says: made again
        self._forget_routes()
        if cls is DestinationCreated:
            dest = ev.destination
            if ev.recovered or not self._wanted(dest) or self._from_target(
                    ev.origin, applied(self.broker).thing_origin(dest.key)):
                return []
            adr = self._render(dest)
            if dest.is_queue:
                return [wire.add_address(adr, wire.ANYCAST),
                        wire.create_queue(adr, dest.name, wire.ANYCAST)]
            return [wire.add_address(adr, wire.MULTICAST)]
        if cls is DestinationDeleted:
            dest = ev.destination
            if not self._wanted(dest) or self._from_target(
                    ev.origin, applied(self.broker).thing_origin(dest.key)):
                return []
            adr = self._render(dest)
            if dest.is_queue:
                return [wire.delete_queue(adr, dest.name), wire.delete_address(adr, wire.ANYCAST)]
            return [wire.delete_address(adr, wire.MULTICAST)]
        if cls is SubscriptionCreated:
            if ev.recovered or not self._wanted(ev.topic) or self._from_target(
                    ev.origin, applied(self.broker).thing_origin(ev.key)):
                return []
            return [wire.create_queue(self._render(ev.topic),
                                      wire.subscription_queue(ev.client_id, ev.name),
                                      wire.MULTICAST, ev.selector)]
        if cls is SubscriptionDeleted:
            if not self._wanted(ev.topic) or self._from_target(
                    ev.origin, applied(self.broker).thing_origin(ev.key)):
                return []
            return [wire.delete_queue(self._render(ev.topic),
                                      wire.subscription_queue(ev.client_id, ev.name))]
        return []

    def _send_route(self, dest: Any, origin: str | None) -> tuple[bytes, bytes]:
        """The mirror's delivery annotations of a send to `dest` from `origin`
        around its internal id (`wire.mirror_annotations`); empty when `dest` is
        not for the target."""
        route = wire.mirror_annotations(origin, self._render(dest)) if self._wanted(dest) \
            else (b"", b"")
        routes = self._send_routes
        if len(routes) >= ROUTES_KEPT:
            routes.clear()
        routes[(dest.key, origin)] = route
        return route

    def _ack_event(self, ev: Any) -> list[bytes]:
        key = ev.key
        dest = ev.destination
        found = self._applied
        if found is None:
            found = self._applied = applied(self.broker)
        if self._from_target(ev.origin, found.ack_origin(key, ev.seq)):
            return []
        if key.startswith("queue://"):
            rkey = (dest.key, key)
            route = self._ack_routes.get(rkey)
            if route is None:
                route = self._ack_route(dest, key)
        else:  # a durable subscription's names are its record's: looked up each time
            queue = self._ack_queue(dest, key) if self._wanted(dest) else None
            route = _NOT_SENT if queue is None else (self._render(dest), queue, b"")
        if not route[0]:
            return []  # not for the target
        msg = ev.message
        origin = msg.origin if msg.origin != self.node else None
        reason = wire.REASONS.get(ev.reason, wire.NORMAL)
        if origin is None and reason == wire.NORMAL and route[2]:
            return [wire.post_ack_with(route[2], wire.id_of(msg))]
        return [wire.post_ack(route[0], route[1], wire.id_of(msg), origin, reason)]

    def _ack_route(self, dest: Any, key: str) -> tuple[str, str, bytes]:
        """(address, queue name, the bytes of a plain postAck before its id) of an
        acknowledgement on the queue `key` of `dest`; `_NOT_SENT` when it is not
        for the target."""
        route = _NOT_SENT
        queue = self._ack_queue(dest, key) if self._wanted(dest) else None
        if queue is not None:
            address = self._render(dest)
            route = (address, queue, wire.post_ack_head(address, queue))
        routes = self._ack_routes
        if len(routes) >= ROUTES_KEPT:
            routes.clear()
        routes[(dest.key, key)] = route
        return route

    def _ack_queue(self, dest: Any, key: str) -> str | None:
        """The target's queue name of an acknowledgement on `key`; None for a
        non-durable subscription (not mirrored)."""
        if key.startswith("queue://"):
            queue = key[len("queue://"):]
        elif key.startswith("durable://"):
            cid, _, name = key[len("durable://"):].partition(":")
            sub = self.broker.region.subscriptions.get(key)
            record = getattr(sub, "record", None)
            if record is not None:
                cid, name = record.client_id, record.name
            queue = wire.subscription_queue(cid, name)
        else:
            return None  # non-durable subscriptions are not mirrored
        return queue


