"""The target side: a peer's mirror link (``amq.mirror``), applied to this broker.

A link whose target address starts with ``$ACTIVEMQ_ARTEMIS_MIRROR`` and that
desires ``amq.mirror`` is a mirror (Artemis' rule). Events are applied in the
order they arrive; each delivery is accepted once its work is stored:

* a message (no ``x-opt-amq-mr-ev-type``): routed to ``x-opt-amq-mr-dst`` (or
  its own address) on a kernel connection that speaks for the source broker,
  with the duplicate id ``$ACTIVEMQ_ARTEMIS_MIRROR_<origin>:<internal id>``
  (Artemis' cache id; given to the kernel beside the message, not added to its
  properties), so a resend after a crash is accepted and dropped;
* ``postAck``: the message with that internal id leaves the queue, with the
  reason the source gave;
* ``addAddress``/``createQueue``/``deleteQueue``/``deleteAddress``: the
  destination or durable subscription is made or removed (idempotently).

Bad input (a wrong annotation type, no internal id, an undecodable message)
rejects that one delivery with the reason; the link and the connection stay.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, ClassVar, Final

from relaymq.broker.connection import ClientConnection
from relaymq.broker.scheduler import PERIOD, REPEAT, SCHEDULED_AT
from relaymq.errors import SecurityError
from relaymq.model.destination import Destination, DestinationKind
from relaymq.model.message import now_millis
from relaymq.outgoing.node import node_id
from relaymq.selector import Selector
from relaymq_amqp import engine as pn
from relaymq_amqp.mapping import destination_for, to_kernel
from relaymq_amqp.scanner import Sections, decode_map_at, scan
from relaymq_amqp.types import Symbol

from relaymq_mirror import batch, wire
from relaymq_mirror.batch import BadBatch, Part, Received
from relaymq_mirror.incoming import IncomingMirror, incoming_mirror
from relaymq_mirror.retries import ack_retries, holder_of
from relaymq_mirror.state import TargetIndex, applied, target_index
from relaymq_mirror.wire import (
    BadEvent,
    Incoming,
    PostAck,
    post_ack_of,
    read_mirrored,
    read_post_ack,
)

log = logging.getLogger("relaymq.mirror")

#: credit granted to a source and when it is topped up (Artemis' amqpCredits and
#: amqpLowCredits are 1000 and 300; more in flight keeps a source that waits for
#: this broker's store syncs busy: a backlog drains in bigger store batches)
CREDIT: Final = 5000
LOW_CREDIT: Final = 2500
#: postAcks applied together at most (they wait for one store sync)
MAX_ACKS: Final = 1000
#: events applied before giving the loop a turn (store writes, settlements, reads)
YIELD_EVERY: Final = 200
#: addresses whose parsed destination is kept (cleared when full)
SPOTS_KEPT: Final = 4096


def _to(data: bytes) -> str | None:
    """The message's own address (properties.to), where Artemis routes when the
    event has no ``x-opt-amq-mr-dst``."""
    try:
        props = scan(data).properties
    except Exception:  # noqa: BLE001 - the decode error comes with to_kernel
        return None
    if props and len(props) > 2 and isinstance(props[2], str):
        return str(props[2])
    return None


#: what a message scheduled for later delivery over AMQP carries in its bytes
DELIVERY_MARKER: Final = b"x-opt-delivery-"


def _delivery_delay(data: bytes, sections: Sections) -> int:
    """How long (ms) a mirrored message waits before it is delivered, as Artemis'
    target reads it (`AMQPMessage.getScheduledDeliveryTime`): the message
    annotation `x-opt-delivery-time` (epoch ms; a time past means now), else
    `x-opt-delivery-delay` (ms from now, when the target reads it). Only the
    annotations: `AMQ_SCHEDULED_*` application properties are not Artemis' (a
    RelayMQ source's repeating job brings its period and count so: `_repeating`)."""
    span = sections.message_annotations
    if span is None:
        return 0
    try:
        ann = decode_map_at(data, span)
    except Exception:  # noqa: BLE001 - unreadable annotations: to_kernel has read the rest
        return 0
    at = ann.get("x-opt-delivery-time")
    if isinstance(at, int) and not isinstance(at, bool):
        return max(int(at) - now_millis(), 0)
    delay = ann.get("x-opt-delivery-delay")
    if isinstance(delay, int) and not isinstance(delay, bool) and delay > 0:
        return int(delay)
    return 0


#: what a RelayMQ source's repeating scheduled job carries in its bytes
REPEAT_MARKER: Final = PERIOD.encode()


def _repeating(message: Any, data: bytes, sections: Sections) -> None:
    """A RelayMQ source's repeating job (`AMQ_SCHEDULED_PERIOD` and `_REPEAT` beside
    `x-opt-delivery-time`, its first due time): the scheduler here holds the job,
    due first at that very time (`SCHEDULED_AT`), so each copy it fires has the id
    of the source's copy of that firing."""
    props = message.properties
    period = props.get(PERIOD)
    repeat = props.get(REPEAT)
    span = sections.message_annotations
    if not isinstance(period, int) or isinstance(period, bool) or period <= 0 or span is None:
        return
    try:
        at = decode_map_at(data, span).get("x-opt-delivery-time")
    except Exception:  # noqa: BLE001 - unreadable annotations: to_kernel has read the rest
        return
    if not isinstance(at, int) or isinstance(at, bool):
        return
    message.scheduled_period = period
    message.scheduled_repeat = repeat if isinstance(repeat, int) and not isinstance(
        repeat, bool) and repeat > 0 else 0
    message.annotations = {**(message.annotations or {}), SCHEDULED_AT: int(at)}


class MirrorTarget:
    """`relaymq.amqp_link_handlers` entry point for ``amq.mirror``."""

    #: a ClassVar: compiled (mypyc), a plain class attribute would be a per-instance slot
    address_prefixes: ClassVar[tuple[str, ...]] = (wire.MIRROR_ADDRESS,)

    def __init__(self, link: Any) -> None:
        self.link = link
        self.broker = link.broker
        self.source_id: str = ""
        self.local_id: str = ""  # this broker's node id (set on attach)
        self._applied = applied(self.broker)
        self._index: TargetIndex | None = None
        #: an address written with its kind (``queue://X``) -> its destination
        self._dests: dict[str, Destination] = {}
        self.kconn: ClientConnection | None = None
        self._queue: deque[tuple[Any, bytes]] = deque()
        self._running = False
        #: store writes of routed messages not yet done (each leaves when done)
        self._stores: set[Any] = set()
        #: the last store write's awaitable and the deliveries it settles when done
        self._group_of: Any = None
        self._group: list[Any] = []
        #: postAcks read and not applied yet: applied together after one wait for the
        #: store writes of the messages routed before them
        self._acks: list[tuple[Any, PostAck]] = []
        self._outstanding = 0
        self.applied = 0
        self.rejected = 0
        #: when this link's last run of events ended (wall clock; set per run, not per
        #: event); management's incoming listing reads it
        self.last_event: float | None = None
        #: this source's entry in that listing, which keeps its last refusal
        self.incoming: IncomingMirror | None = None
        self._warned: set[str] = set()
        #: postAcks waiting for their message, kept in the store (every link's, looked
        #: for by one task of the broker's)
        self.retries = ack_retries(self.broker)
        self._poke = False  # a message a pending postAck names is being stored
        #: storing events of this link failed (it is closed for the source to try again)
        self.failed_to_store = False
        #: with `schedulerSupport`, a mirrored message scheduled on the source waits here too
        self._scheduling = getattr(self.broker, "scheduler", None) is not None
        #: the source is a RelayMQ broker (its connection's open says `product:
        #: RelayMQ`): its repeating scheduled jobs come as jobs (`_repeating`)
        self._relaymq_source = False

    # -- attach ----------------------------------------------------------------------
    def attach(self) -> None:
        link = self.link
        address = link.address or ""
        if not link.peer_sends:
            link.refuse("amqp:not-implemented",
                        "a mirror link carries events from the source: attach it as a sender")
            return
        if wire.MIRROR_CAPABILITY not in link.desired_capabilities:
            link.refuse("amqp:precondition-failed",
                        f"a link to {address} must desire the capability {wire.MIRROR_CAPABILITY} "
                        "(Artemis mirror)")
            return
        if not address.startswith(wire.MIRROR_ADDRESS):
            link.refuse("amqp:precondition-failed",
                        f"a mirror link's target address must start with {wire.MIRROR_ADDRESS}")
            return
        source = link.remote_properties.get(wire.BROKER_ID)
        if not isinstance(source, str) or not source:
            link.refuse("amqp:precondition-failed",
                        f"a mirror link must carry the link property {wire.BROKER_ID} (the "
                        "source broker's node id)")
            return
        local = node_id(self.broker)
        if source == local:
            link.refuse("amqp:precondition-failed",
                        f"a broker cannot mirror to itself: {wire.BROKER_ID} {source} is this "
                        "broker's node id")
            return
        kconn = link.kconn
        try:
            kconn.authorize("write", Destination.queue(address))
        except SecurityError as exc:
            link.refuse("amqp:unauthorized-access", str(exc))
            incoming_mirror(self.broker, source).refused(f"link refused: {exc}")
            return
        self.source_id = source
        self.local_id = local
        self.kconn = ClientConnection(self.broker, kconn.principal, None, "amqp",
                                      kconn.remote_address, True, source)
        self._index = target_index(self.broker)  # index messages from now on
        self._relaymq_source = link.remote_connection_properties.get("product") == "RelayMQ"
        # a RelayMQ source reads its addresses as queue:// and topic:// and sends a run
        # of events in one transfer; Artemis ignores both properties
        link.open(properties={wire.BROKER_ID: local, wire.PREFIXED_ADDRESSES: True,
                              batch.PROPERTY: True},
                  offered_capabilities=[wire.MIRROR_CAPABILITY],
                  snd_settle_mode=link.remote_snd_settle_mode, rcv_settle_mode=pn.RCV_FIRST,
                  credit=CREDIT)
        self._outstanding = 0
        self.retries.attached(self)
        self.incoming = incoming_mirror(self.broker, source)
        self.incoming.attached(self)
        log.info("mirror link %s from broker %s (%s) attached", link.name, source,
                 link.remote_container)

    # -- deliveries ------------------------------------------------------------------
    def on_delivery(self, delivery: Any) -> None:
        data = self.link.receive(delivery)
        if data is None:
            return
        self._outstanding += 1
        try:
            events = batch.unpack(data)
        except BadBatch as exc:
            self._bad(delivery, str(exc))
            return
        if events is None:
            self._queue.append((delivery, data))
        else:  # each event in turn, as if it had come alone
            received = Received(delivery, len(events))
            queue = self._queue
            for i, event in enumerate(events):
                queue.append((Part(received, i), event))
        if not self._running:
            self._running = True
            asyncio.get_running_loop().create_task(self._run())

    def on_flow(self) -> None:
        pass

    def on_detach(self, closed: bool) -> None:
        log.info("mirror link %s from broker %s detached", self.link.name, self.source_id)
        self._queue.clear()
        self._acks.clear()
        self.retries.detached(self)
        if self.incoming is not None:
            self.incoming.detached(self)

    def storing(self) -> bool:
        """A message this link received is being stored."""
        return bool(self._stores)

    async def _run(self) -> None:
        queue = self._queue
        turn = 0
        try:
            if not self.retries.loaded:
                await self.retries.load()  # what a previous run of this broker left
            while not self.link.closed:
                if queue and len(self._acks) < MAX_ACKS:
                    delivery, data = queue.popleft()
                    # a RelayMQ source's postAck or message is read at fixed places;
                    # anything else (an Artemis source's, a control event) the general way
                    ack = read_post_ack(data)
                    if ack is not None:
                        self._acks.append((delivery, ack))  # applied with the next ones
                    else:
                        mirrored = read_mirrored(data)
                        if mirrored is not None:
                            try:
                                await self._send(delivery, mirrored.ident, mirrored.origin,
                                                 mirrored.address, mirrored.message_bytes)
                            except BadEvent as exc:
                                self._bad(delivery, str(exc))
                            except Exception as err:  # noqa: BLE001 - refuse it, keep the link
                                log.exception("mirror link %s: applying an event failed",
                                              self.link.name)
                                self._settled(delivery, f"{type(err).__name__}: {err}",
                                              "amqp:internal-error")
                        else:
                            inc = self._parse(delivery, data)
                            if inc is not None:
                                if inc.event == wire.POST_ACK:
                                    self._gather_ack(delivery, inc)
                                else:
                                    await self._apply(delivery, inc)
                    turn += 1
                    if turn >= YIELD_EVERY:
                        # let the store write what is routed so far, settle what is
                        # stored and read more: a long run of events is pipelined
                        turn = 0
                        self._absorb()
                        await asyncio.sleep(0)
                elif self._acks:
                    await self._apply_acks()
                else:
                    self._absorb()
                    break
        except Exception:  # noqa: BLE001 - keep the link alive
            log.exception("mirror link %s failed", self.link.name)
        finally:
            self._running = False
            self.last_event = time.time()  # once per run of events

    def _absorb(self) -> None:
        """Take what the change feed reported into the index of where messages are
        (the work a postAck would do first): a target that gets no postAcks (a
        standby whose source has no consumers) would otherwise keep every stored
        message's event, with the message, until the first one."""
        index = self._index
        if index is not None:
            index.absorb()

    def _settled(self, delivery: Any, error: str | None = None, condition: str = "amqp:invalid-field") -> None:
        link = self.link
        if error is None:
            self.applied += 1
        else:
            self.rejected += 1
            self._error(error)
        if type(delivery) is Part:
            if not self._part_done(delivery, error):
                return
        elif error is None:
            link.accept(delivery)
        else:
            link.reject(delivery, condition, error)
        self._credit_back(1)

    def _credit_back(self, settled: int) -> None:
        """`settled` deliveries are settled: top the source's credit up when low."""
        self._outstanding -= settled
        link = self.link
        credit = link.credit
        if credit + self._outstanding <= LOW_CREDIT:
            link.flow(CREDIT - credit - self._outstanding)

    def _settle_all(self, deliveries: list[Any], error: str | None) -> None:
        """Settle the deliveries of one store write (accepted), then look at the
        credit once. When the write failed (`error`) the events are not refused:
        they are settled `modified` (delivery-failed) and the link is closed, so the
        source keeps them and sends them again on its next link (the source's
        store-and-forward queue holds them until they are accepted), as often as
        the write fails; nothing the source sent is lost to a failing disk here."""
        link = self.link
        settled = 0
        if error is None:
            for delivery in deliveries:
                if type(delivery) is Part:
                    if self._part_done(delivery, None):
                        settled += 1
                else:
                    link.accept(delivery)
                    settled += 1
            self.applied += len(deliveries)
        else:
            for delivery in deliveries:
                if type(delivery) is Part:
                    received = delivery.batch
                    if received.settled:
                        continue
                    received.settled = True
                    delivery = received.delivery
                link.modify(delivery, failed=True)
            self.failed_to_store = True
            entry = self.incoming  # logged once per reason while the failure repeats
            news = entry is None or entry.store_failed(self, error)
            self._error(error)
            (log.warning if news else log.debug)(
                "mirror link %s from %s: storing events failed (%s); closing the link, the "
                "source sends them again", link.name, self.source_id, error)
            link.close("amqp:internal-error", f"storing mirrored events failed: {error}; "
                       "send them again")
            return
        self._credit_back(settled)

    def _part_done(self, part: Part, error: str | None) -> bool:
        """Note the verdict on one event of a batch; when it was the last, settle
        the batch's delivery (True): accepted, or rejected naming the refused ones."""
        received = part.batch
        if not received.done(part, error) or received.settled:
            return False
        received.settled = True
        if received.refused:
            self.link.settle(received.delivery, pn.REJECTED, pn.Condition(
                "amqp:invalid-field", received.description(),
                {Symbol(batch.REFUSED): received.refused}))
        else:
            self.link.accept(received.delivery)
        return True

    def _error(self, error: str) -> None:
        if self.incoming is not None:
            self.incoming.refused(error)

    def duplicates(self) -> int:
        """Mirrored sends of this link the kernel dropped as duplicates."""
        kconn = self.kconn
        return kconn.duplicates if kconn is not None else 0

    def _gather_ack(self, delivery: Any, inc: Incoming) -> None:
        """Keep a postAck read the general way for the next batch (refused now when
        its fields are wrong)."""
        try:
            self._acks.append((delivery, post_ack_of(inc)))
        except BadEvent as exc:
            self._bad(delivery, str(exc))

    def _bad(self, delivery: Any, error: str) -> None:
        kind = error.split(":")[0][:40]
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("mirror link %s from %s: refused an event: %s", self.link.name,
                        self.source_id, error)
        self._settled(delivery, error)

    def _parse(self, delivery: Any, data: bytes) -> Incoming | None:
        """The event in `data`, or None when it cannot be read (refused)."""
        try:
            return Incoming(data)
        except BadEvent as exc:
            self._bad(delivery, str(exc))
        except Exception as err:  # noqa: BLE001 - refuse this event, keep the link
            log.exception("mirror link %s: reading an event failed", self.link.name)
            self._settled(delivery, f"{type(err).__name__}: {err}", "amqp:internal-error")
        return None

    async def _apply(self, delivery: Any, inc: Incoming) -> None:
        """Apply a message or a control event (postAcks are gathered by `_run`)."""
        try:
            if inc.event is None:
                ident = inc.mirror_id()
                origin = inc.string(wire.BROKER_ID, "delivery", required=False)
                address = inc.string(wire.INTERNAL_DESTINATION, "delivery", required=False)
                await self._send(delivery, ident, origin, address, inc.message_bytes)
                return
            event = inc.event
            await self._apply_acks()  # in order: the postAcks before this event first
            await self._drain()  # control events see every message routed before them
            if event == wire.ADD_ADDRESS:
                await self._add_address(inc)
            elif event == wire.CREATE_QUEUE:
                await self._create_queue(inc)
            elif event == wire.DELETE_QUEUE:
                await self._delete_queue(inc)
            elif event == wire.DELETE_ADDRESS:
                await self._delete_address(inc)
            else:
                raise BadEvent(f"unknown mirror event {event!r}")
            self._settled(delivery)
        except BadEvent as exc:
            self._bad(delivery, str(exc))
        except Exception as err:  # noqa: BLE001 - refuse this event, keep the link
            log.exception("mirror link %s: applying an event failed", self.link.name)
            self._settled(delivery, f"{type(err).__name__}: {err}", "amqp:internal-error")

    async def _apply_acks(self) -> None:
        """Apply the postAcks read so far, after one wait for the store writes of
        every message routed before them (the store commits those together). The
        messages found are removed with one `remove_messages` per queue and
        reason, so a stream of sends and acks costs a store sync and a pass over
        each queue per batch, not per ack; each postAck is settled once its
        removal is stored."""
        acks, self._acks = self._acks, []
        if not acks:
            return
        await self._drain()  # a postAck finds every message routed before it
        index = target_index(self.broker)
        index.absorb()  # what the feed reported so far: most postAcks are found at once
        ids = index.ids
        groups: dict[tuple[str, str], tuple[Any, list[int], list[Any], list[PostAck]]] = {}
        later: list[tuple[Any, tuple[str, str, str, int, str]]] = []
        #: (address, queue) -> its holder, looked up once per batch (a batch's
        #: postAcks mostly name one queue)
        holders: dict[tuple[str, str], Any] = {}
        source = self.source_id
        for delivery, ack in acks:
            if self.link.closed:
                return
            try:
                address = ack.address
                queue_name = ack.queue
                ident = ack.ident
                reason = ack.reason
                spot = (address, queue_name)
                if spot in holders:
                    holder = holders[spot]
                else:
                    holder = holders[spot] = self._holder(address, queue_name)
                if holder is None:
                    if f"queue {queue_name}" not in self._warned:
                        self._warned.add(f"queue {queue_name}")
                        log.warning("mirror link %s: postAck for queue %r of %r, which does not "
                                    "exist here; ignored", self.link.name, queue_name, address)
                    self._settled(delivery)
                    continue
                per = ids.get(holder.key)
                seq = per.get(ident) if per is not None else None
                if seq is None:  # not indexed yet: absorb, read the queue once, look again
                    seq = await index.find(holder, ident)
                if seq is None:  # not here (yet): kept (stored), tried again in the background
                    later.append((delivery, (source, address, queue_name, ident, reason)))
                    continue
                index.forget(holder.key, ident)
                self._applied.ack(holder.key, seq, source)
                group = groups.get((holder.key, reason))
                if group is None:
                    group = groups[(holder.key, reason)] = (holder, [], [], [])
                group[1].append(seq)
                group[2].append(delivery)
                group[3].append(ack)
            except BadEvent as exc:
                self._bad(delivery, str(exc))
            except Exception as err:  # noqa: BLE001 - refuse this event, keep the link
                log.exception("mirror link %s: applying a postAck failed", self.link.name)
                self._settled(delivery, f"{type(err).__name__}: {err}", "amqp:internal-error")
        if later:
            await self._keep_for_later(later)
        if groups:
            await asyncio.gather(*(self._remove_group(reason, holder, seqs, deliveries, items)
                                   for (_key, reason), (holder, seqs, deliveries, items)
                                   in groups.items()))

    async def _keep_for_later(self, later: list[tuple[Any, tuple[str, str, str, int, str]]]) -> None:
        """Store postAcks whose message is not here yet, then accept them (Artemis
        keeps them in its journal too): a restart of this broker does not lose them."""
        error = None
        try:
            await self.retries.add([item for _, item in later])
        except Exception as err:  # noqa: BLE001 - refuse these events, keep the link
            log.exception("mirror link %s: storing postAck retries failed", self.link.name)
            error = f"{type(err).__name__}: {err}"
        if self.link.closed:
            return
        self._settle_all([delivery for delivery, _ in later], error)
        self.retries.start()

    async def _remove_group(self, reason: str, holder: Any, seqs: list[int],
                            deliveries: list[Any], acks: list[PostAck]) -> None:
        """Remove `seqs` from `holder` (one pass, one store write), then settle. A
        message a consumer here holds (delivered, not settled) is not removed: its
        postAck is kept as pending (stored) and applied once the consumer releases
        it, so the acknowledgement on the source wins (as Artemis' ack manager
        keeps a postAck for a delivering message in its retry list)."""
        error = None
        held: list[int] = []
        try:
            await holder.remove_messages(seqs, reason, held)
        except Exception as err:  # noqa: BLE001 - refuse these events, keep the link
            log.exception("mirror link %s: removing acknowledged messages failed", self.link.name)
            error = f"{type(err).__name__}: {err}"
        if held and error is None:
            index = target_index(self.broker)
            waiting = set(held)
            later = []
            settle = []
            for i in range(len(seqs)):
                if seqs[i] in waiting:
                    ack = acks[i]
                    index.remember(holder.key, ack.ident, seqs[i])
                    later.append((deliveries[i], (self.source_id, ack.address, ack.queue,
                                                  ack.ident, ack.reason)))
                else:
                    settle.append(deliveries[i])
            await self._keep_for_later(later)
            deliveries = settle
        if self.link.closed:
            return
        self._settle_all(deliveries, error)

    async def _drain(self) -> None:
        stores, self._stores = list(self._stores), set()
        for s in stores:
            try:
                await s
            except Exception:  # noqa: BLE001 - reported on the delivery already
                pass

    # -- messages --------------------------------------------------------------------
    async def _send(self, delivery: Any, ident: int, origin: str | None, address: str | None,
                    data: bytes) -> None:
        """Route the mirrored message `data` (without the mirror's delivery
        annotations) with its internal id, origin broker and routing address."""
        if not origin:
            origin = self.source_id
        if origin == self.local_id:
            self._settled(delivery)  # our own message came back round: already here
            return
        if not address:
            address = _to(data)
        dest = self._destination(address) if address else None
        try:
            message, sections = to_kernel(data, dest)
        except Exception as err:  # noqa: BLE001 - undecodable or without an address
            raise BadEvent(f"the mirrored message cannot be read: {err}") from None
        message.origin = origin
        if self._scheduling and DELIVERY_MARKER in data:
            # scheduled on the source (Artemis mirrors it when it is sent): the
            # target holds it for the same time (its scheduler keeps the duplicate
            # id with the job, and the internal id with the message)
            message.scheduled_delay = _delivery_delay(data, sections)
            if self._relaymq_source and REPEAT_MARKER in data:
                _repeating(message, data, sections)
        if ident != wire.internal_id(message.message_id):
            # an id that is not the hash of the message id (an Artemis journal id):
            # kept with the message; otherwise `id_of` finds it again without a
            # stored annotation (none to encode with every message)
            ann = dict(message.annotations or {})
            ann[wire.ANNOTATION_ID] = ident
            message.annotations = ann
        kconn = self.kconn
        assert kconn is not None
        try:
            # the duplicate id goes beside the message, not into its properties: they
            # stay unparsed (and are not stored again as JSON)
            stored = await kconn.submit(message, None, f"{wire.MIRROR_ADDRESS}_{origin}:{ident}")
        except Exception as err:  # noqa: BLE001 - refused by the kernel
            self._settled(delivery, f"{type(err).__name__}: {err}", "amqp:internal-error")
            return
        idents = self.retries.idents
        if idents and ident in idents:
            self._poke = True
        if stored is None:
            self._settled(delivery)
            if self._poke:
                self._poke = False
                self.retries.wake()
            return
        if stored is self._group_of:
            # the store writes a loop turn's messages together and hands each the
            # same future: one callback settles them all (none per message)
            self._group.append(delivery)
            return
        fut = asyncio.ensure_future(stored)
        self._stores.add(fut)
        group = [delivery]
        self._group_of = stored
        self._group = group

        def done(f: asyncio.Future[Any]) -> None:
            self._stores.discard(f)
            if self._group is group:
                self._group_of = None
            if self._poke:
                self._poke = False
                self.retries.wake()  # a pending postAck's message may be here now
            err = None if not f.cancelled() and f.exception() is None else str(
                f.exception() if not f.cancelled() else "cancelled")
            if self.link.closed:
                return
            self._settle_all(group, err)

        fut.add_done_callback(done)

    def _destination(self, address: str) -> Destination:
        """Where an address of the source goes: ``queue://X``/``topic://X`` as
        RelayMQ writes them; a bare (Artemis) name is a queue or topic that exists
        by that name, else a queue."""
        if "://" in address:
            found = self._dests.get(address)
            if found is None:
                found = destination_for(address)
                dests = self._dests
                if len(dests) >= SPOTS_KEPT:
                    dests.clear()
                dests[address] = found
            return found
        region = self.broker.region
        queue = Destination.queue(address)
        if queue in region.queues:
            return queue
        topic = Destination.topic(address)
        if topic in region.topics:
            return topic
        return queue

    # -- acknowledgements -------------------------------------------------------------
    def _holder(self, address: str, queue: str) -> Any:
        return holder_of(self.broker, address, queue)

    # -- addresses and queues ------------------------------------------------------------
    def _mark(self, key: str) -> None:
        applied(self.broker).thing(key, self.source_id)

    async def _add_address(self, inc: Incoming) -> None:
        info = inc.json_body()
        name = str(info.get("name") or inc.string(wire.ADDRESS) or "")
        if not name or name.startswith("$ACTIVEMQ_ARTEMIS") or info.get("internal") \
                or info.get("temporary"):
            return
        types = info.get("routingTypes") or []
        if "://" in name:
            dest = destination_for(name)
        elif wire.MULTICAST in types:
            dest = Destination.topic(name)
        else:
            return  # an ANYCAST address: its queue comes with createQueue
        if dest.kind == DestinationKind.TOPIC and dest not in self.broker.region.topics:
            self._mark(dest.key)
            await self.broker.management.create_topic(dest.name)

    async def _create_queue(self, inc: Incoming) -> None:
        info = inc.json_body()
        name = str(info.get("name") or inc.string(wire.QUEUE) or "")
        address = str(info.get("address") or inc.string(wire.ADDRESS) or name)
        routing = str(info.get("routing-type") or "ANYCAST").upper()
        if not name or name.startswith("$ACTIVEMQ_ARTEMIS") or info.get("temporary"):
            return
        topic_name = destination_for(address).name if "://" in address else address
        if routing == "ANYCAST":
            dest = Destination.queue(name)
            if dest not in self.broker.region.queues:
                self._mark(dest.key)
                await self.broker.management.create_queue(name)
            return
        split = wire.split_subscription_queue(name) or (name, name)
        client_id, sub_name = split
        key = f"durable://{client_id}:{sub_name}"
        selector_text = info.get("filter-string")
        if key in self.broker.region.subscriptions:
            return
        assert self.kconn is not None
        conn = ClientConnection(self.broker, self.kconn.principal, client_id, "amqp", None, True,
                                self.source_id)
        selector = Selector.compile(str(selector_text)) if selector_text else None
        self._mark(key)
        await conn._durable(Destination.topic(topic_name), sub_name, selector, False)

    async def _delete_queue(self, inc: Incoming) -> None:
        address = inc.string(wire.ADDRESS) or ""
        name = inc.string(wire.QUEUE) or ""
        holder = self._holder(address, name)
        if holder is None:
            return
        self._mark(holder.key)
        dest = holder.destination
        if holder.key.startswith("durable://"):
            cid, _, sub = holder.key[len("durable://"):].partition(":")
            await self.broker.management.delete_durable_subscription(cid, sub)
        elif dest.is_queue:
            await self.broker.management.delete_destination(dest)

    async def _delete_address(self, inc: Incoming) -> None:
        info = inc.json_body()
        name = str(info.get("name") or inc.string(wire.ADDRESS) or "")
        types = info.get("routingTypes") or []
        if "://" in name:
            dest = destination_for(name)
        elif wire.MULTICAST in types:
            dest = Destination.topic(name)
        else:
            dest = Destination.queue(name)
        region = self.broker.region
        if (dest.is_queue and dest in region.queues) or (dest.is_topic and dest in region.topics):
            self._mark(dest.key)
            await self.broker.management.delete_destination(dest)

    def status(self) -> dict[str, Any]:
        retries = self.retries
        return {"source": self.source_id, "link": self.link.name, "applied": self.applied,
                "rejected": self.rejected,
                "acks_not_found": retries.not_found.get(self.source_id, 0),
                "acks_pending": len(retries.of(self.source_id)),
                "duplicates": self.duplicates()}
