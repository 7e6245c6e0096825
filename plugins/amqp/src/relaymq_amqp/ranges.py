"""Sequence-range links: read a queue's stored messages by sequence number.

A receiver link whose source filter carries ``relaymq-seq-range`` reads the
messages of a queue (or durable subscription) with ``after < seq <= until``,
without consuming them, then the broker closes the link: the end of the range.
Each transfer's delivery tag is ``SEQ:TIMESTAMP`` in ASCII digits (the sequence
number and the broker's timestamp in epoch ms, which the stored AMQP bytes may
lack), so a reader knows where it is without the message being re-encoded. The answer to the attach
carries ``relaymq-seq-info`` = ``[first, last]`` (`Management.sequence_bounds`).
A ``relaymq-seq-release`` filter ``[through]`` removes the messages up to
``through`` as acknowledged (what a reader has committed), then closes the link.
This is how the Spark source's executors and driver talk to the broker
(docs/spark.md). Links without these filters never come here.

Batches: a range link whose filter also carries ``relaymq-seq-batch`` =
``[n]`` gets up to `n` messages per transfer (what one unit of credit covers),
so a reader pays per batch, not per message. Such a transfer is one AMQP
message with one data section holding, for each message in order, a 20-byte
big-endian head (sequence number u64, broker timestamp in epoch ms u64, length
u32) and then the message's encoded AMQP bytes; its delivery tag is the last
sequence number. The answer to the attach echoes the filter, so a reader knows
the broker batches (a broker that does not leaves it out).

Range links are served like the extension links of link_handlers.py (an
`IncomingLink` with a handler), so ordinary links and their per-message path
are untouched. This module is interpreted (not in the compiled list): its cost
is per range, not per message of ordinary links.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import replace
from typing import Any

from relaymq.errors import DestinationError
from relaymq.model.destination import Destination
from relaymq.model.message import Message

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Condition
from relaymq_amqp.link_handlers import IncomingLink
from relaymq_amqp.links import condition_for
from relaymq_amqp.mapping import ENCODING, destination_for, from_kernel
from relaymq_amqp.types import Described, Symbol

log = logging.getLogger("relaymq.amqp.ranges")

RANGE_FILTER = "relaymq-seq-range"
RANGE_DESCRIPTOR = "relaymq:seq-range:list"
RELEASE_FILTER = "relaymq-seq-release"
RELEASE_DESCRIPTOR = "relaymq:seq-release:list"
INFO_FILTER = "relaymq-seq-info"
INFO_DESCRIPTOR = "relaymq:seq-info:list"
BATCH_FILTER = "relaymq-seq-batch"
BATCH_DESCRIPTOR = "relaymq:seq-batch:list"
PAGE = 1000
#: the most messages one batched transfer carries, whatever a reader asks for
MAX_BATCH = 10_000
#: a batch is cut once its bytes pass this (a message is never split)
BATCH_BYTES = 4 << 20
BATCH_HEAD = struct.Struct(">QQI")
_DATA_SECTION = b"\x00\x53\x75\xb0"


def _tag(seq: int, timestamp: int) -> bytes:
    return f"{seq}:{timestamp}".encode()


def wants_range(source: Any) -> bool:
    """True when a receiver's source asks for a range or a release."""
    flt = source.filter
    return bool(flt) and (RANGE_FILTER in flt or RELEASE_FILTER in flt)


def _ints(value: Any, n: int, name: str) -> list[int | None]:
    inner = value.value if isinstance(value, Described) else value
    if not isinstance(inner, (list, tuple)) or len(inner) < n:
        raise ValueError(f"{name} must be a list of {n} sequence numbers, got {inner!r}")
    out: list[int | None] = []
    for v in inner[:n]:
        if v is None:
            out.append(None)
        elif isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            out.append(int(v))
        else:
            raise ValueError(f"{name}: {v!r} is not a sequence number (an integer >= 0)")
    return out


def range_link(conn: Any, link: Any) -> IncomingLink:
    """Serve a range (or release) link: an `IncomingLink` driven by a `RangeReader`,
    kept with the connection's extension links (link_handlers.py)."""
    incoming = IncomingLink(conn, link, [], [])
    reader = RangeReader(incoming)
    incoming.handler = reader
    reader.attach()
    return incoming


class RangeReader:
    """The broker's side of one sequence range (or one release)."""

    def __init__(self, link: IncomingLink) -> None:
        self.link = link
        self._credit = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: messages per transfer (0: one message per transfer)
        self.batch = 0

    def attach(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        link = self.link
        source = link.remote_source
        try:
            flt = source.filter
            key, dest = self._target(source.address)
            link.kconn.authorize("read", dest)
            mgmt = link.broker.management
            first, last = await mgmt.sequence_bounds(key)
            release = flt.get(RELEASE_FILTER)
            through = _ints(release, 1, RELEASE_FILTER)[0] if release is not None else None
            after = until = 0
            if release is None:
                after_, until_ = _ints(flt[RANGE_FILTER], 2, RANGE_FILTER)
                after = after_ or 0
                until = last if until_ is None else min(until_, last)
                if BATCH_FILTER in flt:
                    self.batch = min(MAX_BATCH, max(1, _ints(flt[BATCH_FILTER], 1,
                                                             BATCH_FILTER)[0] or 1))
        except Exception as exc:  # noqa: BLE001 - every refusal becomes a condition
            cond = Condition("amqp:invalid-field", str(exc)) if isinstance(exc, ValueError) \
                else condition_for(exc)
            if not link.closed:
                link.refuse(cond.name, cond.description or "")
            return
        if link.closed:
            return
        answer = replace(source, filter={Symbol(k): v for k, v in flt.items()
                                         if k in (RANGE_FILTER, RELEASE_FILTER, BATCH_FILTER)})
        answer.filter[Symbol(INFO_FILTER)] = Described(Symbol(INFO_DESCRIPTOR), [first, last])
        link.open(source=answer, snd_settle_mode=pn.SND_SETTLED, rcv_settle_mode=pn.RCV_FIRST)
        if through is not None:
            await self._release(mgmt, key, through)
        else:
            await self._stream(key, after, until)

    def _target(self, address: str | None) -> tuple[str, Destination]:
        if not address:
            raise DestinationError("a sequence range needs a source address (a queue or "
                                   "durable://CLIENT:NAME)")
        mgmt = self.link.broker.management
        if address.startswith("durable://"):
            sub = next((s for s in mgmt.durable_subscriptions() if s.key == address), None)
            if sub is None:
                raise DestinationError(f"no durable subscription {address}")
            return address, Destination.parse(sub.topic)
        dest = destination_for(address, ())
        if not dest.is_queue:
            raise DestinationError(f"{dest}: a topic holds no messages; read one of its durable "
                                   "subscriptions (durable://CLIENT:NAME)")
        if mgmt.queue(dest) is None:
            raise DestinationError(f"{dest} does not exist")
        return dest.key, dest

    async def _release(self, mgmt: Any, key: str, through: int) -> None:
        try:
            await mgmt.release_through(key, through)
        except Exception as exc:  # noqa: BLE001
            log.warning("release of %s through %d failed: %s", key, through, exc)
            self._finish(condition_for(exc))
            return
        self._finish(None)

    async def _stream(self, key: str, after: int, until: int) -> None:
        link = self.link
        broker = link.broker
        pos = after
        try:
            while pos < until and not link.closed:
                credit = link.credit
                if credit <= 0:
                    self._credit.clear()
                    await self._credit.wait()
                    continue
                if self.batch:
                    pos = await self._send_batch(key, pos, until)
                    if pos < 0:
                        break
                    continue
                page = await broker.read_encoded(key, after=pos, until=until,
                                                 limit=min(credit, PAGE), encoding=ENCODING)
                if link.closed:
                    return
                if not page:
                    break
                for seq, stamp, data in page:
                    if isinstance(data, Message):
                        data = from_kernel(data, 0)
                    pn.delivery_settle(pn.send(link.pn, _tag(seq, stamp), data))
                    pos = seq
                link.flush()
        except Exception as exc:  # noqa: BLE001
            log.warning("range read of %s failed: %s", key, exc)
            self._finish(condition_for(exc))
            return
        self._finish(None)

    async def _send_batch(self, key: str, pos: int, until: int) -> int:
        """One transfer of up to `batch` messages after `pos`; the new position,
        or -1 when there is nothing more (or the link closed)."""
        link = self.link
        page = await link.broker.read_encoded(key, after=pos, until=until, limit=self.batch,
                                              encoding=ENCODING)
        if link.closed or not page:
            return -1
        parts: list[bytes] = [b""]  # the data section's head, once its size is known
        size = 0
        head = BATCH_HEAD.pack
        for seq, stamp, data in page:
            if isinstance(data, Message):
                data = from_kernel(data, 0)
            parts.append(head(seq, stamp or 0, len(data)))
            parts.append(data)
            pos = seq
            size += len(data) + BATCH_HEAD.size
            if size >= BATCH_BYTES:
                break  # the rest comes with the next unit of credit
        parts[0] = _DATA_SECTION + size.to_bytes(4, "big")
        payload = b"".join(parts)  # one copy of the messages' bytes
        pn.delivery_settle(pn.send(link.pn, str(pos).encode(), payload))
        link.flush()
        return pos

    def _finish(self, condition: Condition | None) -> None:
        if not self.link.closed:
            if condition is None:
                self.link.close()
            else:
                self.link.close(condition.name, condition.description)

    def on_flow(self) -> None:
        self._credit.set()

    def on_delivery(self, delivery: Any) -> None:
        pn.delivery_settle(delivery)

    def on_detach(self, closed: bool) -> None:
        self._credit.set()
        task = self._task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
