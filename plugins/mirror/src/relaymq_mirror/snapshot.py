"""``relaymq mirror sync NAME``: send what the broker holds now to the target.

Destinations and durable subscriptions go as ``addAddress``/``createQueue``,
then each stored message as a mirrored send, on a link of its own next to the
mirror's (the target takes several). The target drops messages it already
has (their duplicate id), so a sync can be repeated. A message held by
several durable subscriptions of one topic is sent once and lands on every
subscription of that topic on the target.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from relaymq.errors import StateConflict
from relaymq_amqp.mapping import ENCODING, from_kernel

from relaymq_mirror import wire


async def snapshot(source: Any) -> dict[str, Any]:
    if source.state != "connected" or source.conn is None:
        raise StateConflict(f"mirror {source.name} is not connected to its target "
                            f"({source.state}); a sync needs the target: start the broker "
                            "connection, or wait until it is connected, and sync again")
    session = await source.conn.session()
    sender = await session.open_sender(
        source.snf, name=f"{source.snf}:sync:{uuid.uuid4()}", source_address=source.snf,
        properties={wire.BROKER_ID: source.node}, desired_capabilities=[wire.MIRROR_CAPABILITY])
    futures: list[asyncio.Future[Any]] = []
    counts = {"destinations": 0, "subscriptions": 0, "messages": 0, "target": source.remote_id}
    broker = source.broker
    region = broker.region

    def send(data: bytes) -> None:
        futures.append(sender.send(wire.raw_message(data)))

    try:
        for dest in list(region.queues):
            if source._wanted(dest):
                adr = source._render(dest)
                send(wire.add_address(adr, wire.ANYCAST))
                send(wire.create_queue(adr, dest.name, wire.ANYCAST))
                counts["destinations"] += 1
        for dest in list(region.topics):
            if source._wanted(dest):
                send(wire.add_address(source._render(dest), wire.MULTICAST))
                counts["destinations"] += 1
        subs = [s for s in list(region.subscriptions.values())
                if s.record is not None and source._wanted(s.destination)]
        for sub in subs:
            r = sub.record
            send(wire.create_queue(source._render(sub.destination),
                                   wire.subscription_queue(r.client_id, r.name), wire.MULTICAST,
                                   r.selector))
            counts["subscriptions"] += 1
        seen: set[tuple[str, int]] = set()
        holders = [q for d, q in list(region.queues.items()) if source._wanted(d)] + subs
        for holder in holders:
            dest = holder.destination
            for message in await _messages(broker, holder):
                ident = wire.id_of(message)
                if (dest.key, ident) in seen:
                    continue
                seen.add((dest.key, ident))
                data = message.encoded if message.encoding == ENCODING and message.encoded \
                    is not None else from_kernel(message)
                origin = message.origin if message.origin != source.node else None
                send(wire.with_mirror_annotations(data, ident, origin, source._render(dest)))
                counts["messages"] += 1
                if len(futures) >= 1000:
                    await asyncio.gather(*futures)
                    futures.clear()
        outcomes = await asyncio.gather(*futures)
        refused = [o for o in outcomes if not o.accepted]
        if refused:
            counts["refused"] = len(refused)
    finally:
        await sender.close()
    return counts


async def _messages(broker: Any, holder: Any) -> list[Any]:
    """Everything a queue or subscription holds: stored (paged) and in memory only."""
    out: dict[int, Any] = {}
    if broker.management.persistent:
        after = 0
        while True:
            records = await broker.read_messages(holder.key, after=after, limit=1000)
            for rec in records:
                out[rec.seq] = rec.message
            if len(records) < 1000:
                break
            after = records[-1].seq
    for entry in holder.memory_entries():
        out.setdefault(entry.seq, entry.message)
    return [out[k] for k in sorted(out)]
