"""Broker CPU per message without sockets or client processes.

Why: on a shared machine the end-to-end bench measures the neighbours too.
Here a client's byte stream is recorded once (proton engine against proton
engine, in memory) and replayed into RelayMQ's `AmqpConnection`, which runs
on a real broker; only the broker's work is timed (`time.process_time`):

* produce: open, attach, credit, N transfers (unsettled) -> N `conn.send`
  with their settlements;
* consume: N messages on the queue, a receiver with N credit (N deliveries
  written), then the client's accepted dispositions (N kernel acks).

    .venv/bin/python plugins/amqp/bench/inproc_bench.py [--messages 50000] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from typing import Any

from proton import Message
from relaymq.testing import running_broker
from relaymq_amqp import engine as pn
from relaymq_amqp.connection import AmqpConnection, AmqpOptions
from relaymq_amqp.engine import Engine, Terminus

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


def _record(n: int, body: bytes, consume: bool) -> list[bytes]:
    """What a proton client writes to produce (or consume and accept) `n` messages."""
    client, server = Engine(server=False), Engine(server=True)
    ce, se = _Events(), _Events()
    wire: list[bytes] = []

    def pump() -> None:
        for _ in range(10000):
            moved = False
            out = client.output()
            if out:
                wire.append(out)
                server.push(out)
                moved = True
            out = server.output()
            if out:
                client.push(out)
                moved = True
            client.pump(ce)
            server.pump(se)
            if not moved:
                return

    client.open(container_id="bench")
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
    pn.link_open(link)
    pump()
    server.open(container_id="s")
    (s_ssn,), = se.take("on_session_remote_open")
    pn.session_open(s_ssn)
    (s_link,), = se.take("on_link_remote_open")
    pn.set_source(s_link, pn.remote_source(s_link))
    pn.set_target(s_link, pn.remote_target(s_link))
    pn.link_open(s_link)
    if consume:
        pn.link_flow(link, n)
        pump()
        for i in range(n):
            server.send(s_link, i, body)
        pump()
        for _, (_lk, d) in [x for x in ce.items if x[0] == "on_delivery"]:
            pn.link_advance(link)
            pn.settle_with(d, pn.ACCEPTED)
        pump()
    else:
        pn.link_flow(s_link, n)
        pump()
        for i in range(n):
            client.send(link, i, body)
        pump()
    client.free()
    server.free()
    return wire


async def _run(n: int, profile: bool) -> dict[str, float]:
    body = bytes(Message(body=b"x" * 1024).encode())
    produce = _record(n, body, consume=False)
    consume = _record(n, body, consume=True)
    prof = cProfile.Profile() if profile else None
    out: dict[str, float] = {}
    async with running_broker(None) as broker:
        opts = AmqpOptions(producer_credit=n)
        written: list[int] = []
        for label, stream in (("produce", produce), ("consume", consume)):
            conn = AmqpConnection(broker, opts, lambda b: written.append(len(b)), lambda: None)
            # let authentication finish before the stream goes in
            conn.feed(stream[0][:8])
            for _ in range(5):
                await asyncio.sleep(0)
            rest = [stream[0][8:], *stream[1:]]
            if label == "consume":
                # the attach and credit first, so the deliveries are written...
                attach_and_flow, dispositions = rest[:-1], rest[-1:]
            else:
                attach_and_flow, dispositions = rest, []
            if prof:
                prof.enable()
            t0 = time.process_time()
            for chunk in attach_and_flow:
                conn.feed(chunk)
                for _ in range(3):
                    await asyncio.sleep(0)
            while broker.queue_size("bench") < n and label == "produce":
                await asyncio.sleep(0)
            for chunk in dispositions:  # ...then the client's outcomes
                conn.feed(chunk)
                await asyncio.sleep(0)
            if label == "consume":
                while broker.queue_size("bench") > 0:
                    await asyncio.sleep(0)
            await asyncio.sleep(0)
            out[label] = (time.process_time() - t0) / n * 1e6
            if prof:
                prof.disable()
            conn.connection_lost()
            await asyncio.sleep(0.01)
    if prof:
        pstats.Stats(prof).sort_stats(SORT).print_stats(30)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    for _ in range(args.runs):
        r = asyncio.run(_run(args.messages, args.profile))
        print({k: round(v, 2) for k, v in r.items()} | {"total_us": round(sum(r.values()), 2)})


if __name__ == "__main__":
    main()
