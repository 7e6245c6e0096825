"""Broker CPU per message without sockets or client processes.

Why: on a shared machine the end-to-end bench measures the neighbours too.
Here a client's byte stream is recorded once (proton engine against proton
engine, in memory) and replayed into RelayMQ's `AmqpConnection`, which runs
on a real broker; only the broker's work is timed (`time.process_time`):

a producer's reads (`--batch` unsettled transfers each) alternate with the
consumer's accepted outcomes for what those caused: N `conn.send`, N
deliveries written, N settlements each way, N kernel acks.

    .venv/bin/python plugins/amqp/bench/inproc_bench.py [--messages 50000] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import shutil
import struct
import time
from typing import Any

from proton import Message
from relaymq.model.destination import Destination
from relaymq.testing import broker_config, plugin_element, running_broker
from relaymq_amqp import engine as pn
from relaymq_amqp.connection import AmqpConnection, AmqpOptions
from relaymq_amqp.engine import Engine, Terminus
from relaymq_bench.amqp_codec import disposition_frame

SORT = "tottime"  # the profile order (--profile)


class _Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("on_"):
            raise AttributeError(name)
        return lambda *a: self.items.append((name, a))

    def take(self, name: str) -> list[tuple[Any, ...]]:
        out = [a for n, a in self.items if n == name]
        self.items = [(n, a) for n, a in self.items if n != name]
        return out


def _record(n: int, body: bytes, consume: bool, batch: int,
            ack: str = "ranged") -> tuple[list[bytes], list[bytes]]:
    """What a proton client writes to produce (or consume and accept) `n`
    messages: the set-up bytes, then one chunk per `batch` messages.

    A consumer's outcomes are proton's (`ack="ranged"`: consecutive accepted
    settlements become one first..last disposition), one disposition frame per
    delivery (`"individual"`, as relaymq-bench's client-individual mode writes
    them), or none (`"presettled"`: the link asks for settled deliveries)."""
    client, server = Engine(server=False), Engine(server=True)
    ce, se = _Events(), _Events()

    def pump() -> bytes:
        sent: list[bytes] = []
        for _ in range(10000):
            moved = False
            out = client.output()
            if out:
                sent.append(out)
                server.push(out)
                moved = True
            out = server.output()
            if out:
                client.push(out)
                moved = True
            client.pump(ce)
            server.pump(se)
            if not moved:
                break
        return b"".join(sent)

    client.open(container_id="bench-" + ("c" if consume else "p"))
    ssn = client.session()
    pn.session_open(ssn)
    if consume:
        link = pn.receiver(ssn, "r")
        pn.set_source(link, Terminus(address="queue://bench", kind=1))
        pn.set_target(link, Terminus(kind=2))
    else:
        link = pn.sender(ssn, "s")
        pn.set_source(link, Terminus(kind=1))
        pn.set_target(link, Terminus(address="queue://bench", kind=2))
    pn.link_open(link, snd_settle_mode=pn.SND_SETTLED if consume and ack == "presettled" else None)
    setup = [pump()]
    server.open(container_id="s")
    (s_ssn,), = se.take("on_session_remote_open")
    pn.session_open(s_ssn)
    (s_link,), = se.take("on_link_remote_open")
    pn.set_source(s_link, pn.remote_source(s_link))
    pn.set_target(s_link, pn.remote_target(s_link))
    pn.link_open(s_link)
    batches: list[bytes] = []
    if consume:
        pn.link_flow(link, n)
        setup.append(pump())
        for i in range(n):
            server.send(s_link, i, body)
        pump()
        deliveries = [d for _, (_lk, d) in [x for x in ce.items if x[0] == "on_delivery"]]
        for start in range(0, n, batch):
            for d in deliveries[start:start + batch]:
                pn.link_advance(link)
                if ack != "presettled":
                    pn.settle_with(d, pn.ACCEPTED)
            chunk = pump()
            if ack == "individual":
                chunk = b"".join(disposition_frame(i, i) for i in range(start, min(start + batch, n)))
            batches.append(chunk)
    else:
        pn.link_flow(s_link, n)
        setup.append(pump())
        for start in range(0, n, batch):
            for i in range(start, min(start + batch, n)):
                client.send(link, i, body)
            batches.append(pump())
    client.free()
    server.free()
    return [c for c in setup if c], batches


async def _settle_loop(turns: int = 4) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


def _save(path: str, streams: list[list[bytes]]) -> None:
    """Recorded client streams as length-prefixed chunks (replayed under
    `valgrind`, which counts instructions, without paying for the recording)."""
    with open(path, "wb") as f:
        for chunks in streams:
            f.write(struct.pack(">I", len(chunks)))
            for c in chunks:
                f.write(struct.pack(">I", len(c)))
                f.write(c)


def _load(path: str) -> list[list[bytes]]:
    with open(path, "rb") as f:
        data = f.read()
    pos, streams = 0, []
    for _ in range(4):
        (count,) = struct.unpack_from(">I", data, pos)
        pos += 4
        chunks = []
        for _ in range(count):
            (size,) = struct.unpack_from(">I", data, pos)
            chunks.append(data[pos + 4:pos + 4 + size])
            pos += 4 + size
        streams.append(chunks)
    return streams


def _streams(n: int, batch: int, durable: bool = False, ack: str = "ranged") -> list[list[bytes]]:
    body = bytes(Message(body=b"x" * 1024, durable=durable).encode())
    return [*_record(n, body, False, batch), *_record(n, body, True, batch, ack)]


async def _run(n: int, batch: int, profile: bool, streams: list[list[bytes]],
               kahadb: str | None = None) -> float:
    """Broker CPU per message with a producer and a consumer on one queue,
    `batch` messages per read: each producer read is followed by the
    consumer's outcomes for the deliveries it caused, so the queue stays short."""
    p_setup, p_batches, c_setup, c_batches = streams
    prof = cProfile.Profile() if profile else None
    config = None
    if kahadb:
        shutil.rmtree(kahadb, ignore_errors=True)
        config = broker_config(persistent=True, data_directory=kahadb)
        config.persistence_adapter = plugin_element("kahaDB")
    async with running_broker(config) as broker:
        opts = AmqpOptions(producer_credit=n)
        conns = []
        for setup in (p_setup, c_setup):
            conn = AmqpConnection(broker, opts, lambda b: None, lambda: None)
            conn.feed(setup[0][:8])
            await _settle_loop(5)  # authentication
            for chunk in [setup[0][8:], *setup[1:]]:
                conn.feed(chunk)
                await _settle_loop()
            conns.append(conn)
        producer, consumer = conns
        if prof:
            prof.enable()
        t0 = time.process_time()
        queue = None
        for i, (p_chunk, c_chunk) in enumerate(zip(p_batches, c_batches, strict=True)):
            producer.feed(p_chunk)
            await _settle_loop()
            if kahadb:  # durable messages are delivered once stored: wait (not timed)
                queue = queue or broker.region.queues[Destination.queue("bench")]
                while queue.stats.dispatched < min((i + 1) * batch, n):
                    await asyncio.sleep(0.0002)
                await _settle_loop()  # the consumer connection writes the transfers
            if c_chunk:
                consumer.feed(c_chunk)
            await _settle_loop(2)
        elapsed = time.process_time() - t0
        if prof:
            prof.disable()
        q = broker.region.queues[Destination.queue("bench")]
        assert broker.queue_size("bench") == 0, (q.stats.enqueued, q.stats.dispatched, q.stats.dequeued)
        for conn in conns:
            conn.connection_lost()
        await asyncio.sleep(0.01)
    if prof:
        pstats.Stats(prof).sort_stats(SORT).print_stats(35)
    return elapsed / n * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--batch", type=int, default=100, help="messages per read")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--save", metavar="FILE", help="record the client streams to FILE and stop")
    p.add_argument("--replay", metavar="FILE", help="replay streams saved with --save")
    p.add_argument("--kahadb", metavar="DIR", help="durable messages, stored in a kahaDB in DIR "
                   "(record with the same option)")
    p.add_argument("--ack", choices=("ranged", "individual", "presettled"), default="ranged",
                   help="the consumer's outcomes: proton's coalesced first..last dispositions "
                   "(default), one disposition frame per delivery, or a pre-settled link")
    args = p.parse_args()
    if args.save:
        _save(args.save, _streams(args.messages, args.batch, bool(args.kahadb), args.ack))
        return
    streams = (_load(args.replay) if args.replay
               else _streams(args.messages, args.batch, bool(args.kahadb), args.ack))
    n = len(streams[1]) * args.batch if args.replay else args.messages
    results = [asyncio.run(_run(n, args.batch, args.profile, streams, args.kahadb))
               for _ in range(args.runs)]
    print({"broker_us_per_msg": [round(r, 2) for r in results], "best": round(min(results), 2)})


if __name__ == "__main__":
    main()
