"""What authorization costs on the send path, and what a login costs.

    .venv/bin/python plugins/auth/bench/auth_bench.py [--messages 100000] [--runs 5]

1. Broker CPU per message (send -> deliver -> ack of non-persistent 1 KiB messages
   over one kernel connection, as core/bench/kernel_bench.py) with no security,
   and with <simpleAuthenticationPlugin> + an <authorizationPlugin> of 200
   entries; runs alternate so both see the same machine. The per-message path
   asks the connection's remembered answer, so the difference should be noise.
2. One uncached decision (a new destination on a connection): the map lookup.
3. A login with a scrypt hash (ln=14, what `relaymq passwd` makes) and with a
   plain password, including the worker-thread hop.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from relaymq.broker.broker import Broker
from relaymq.broker.security import ConnectRequest, Principal
from relaymq.config.loader import load_config_text
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq_auth.passwords import hash_password

HASH = hash_password("benchpw")
ENTRIES = "".join(
    f'<authorizationEntry queue="app{i}.>" read="g{i}" write="g{i}" admin="g{i}"/>'
    for i in range(200))
SECURED = f"""<broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
<plugins>
  <simpleAuthenticationPlugin><users>
    <authenticationUser username="bench" password="{HASH}" groups="benchers,g7"/>
    <authenticationUser username="plain" password="benchpw" groups="benchers"/>
  </users></simpleAuthenticationPlugin>
  <authorizationPlugin><map><authorizationMap><authorizationEntries>
    {ENTRIES}
    <authorizationEntry queue="bench.>" read="benchers" write="benchers" admin="benchers"/>
  </authorizationEntries></authorizationMap></map></authorizationPlugin>
</plugins></broker>"""
OPEN = '<broker xmlns="http://activemq.apache.org/schema/core" persistent="false"/>'


async def _send_path(xml: str, n: int, user: str | None) -> float:
    broker = Broker(load_config_text(xml))
    await broker.start()
    try:
        conn = await broker.connect(ConnectRequest(user, "benchpw" if user else None))
        dest = Destination.queue("bench.q")
        consumer = None
        received = 0

        def on_message(delivery):  # type: ignore[no-untyped-def]
            nonlocal received
            received += 1
            consumer.ack(delivery.id)

        consumer = await conn.subscribe(dest, on_message=on_message)
        body = b"x" * 1024
        t0 = time.process_time()
        for _ in range(n):
            await conn.send(Message(body, destination=dest))
        elapsed = time.process_time() - t0
        assert received == n
        return elapsed / n * 1e6
    finally:
        await broker.stop()


async def _decisions(n: int) -> float:
    broker = Broker(load_config_text(SECURED))
    await broker.start()
    try:
        service = broker.extensions["auth"]
        amap = service.authorization
        who = Principal("bench", frozenset({"benchers", "g7"}))
        dests = [Destination.queue(f"app{i % 200}.orders.{i}") for i in range(n)]
        t0 = time.process_time()
        for d in dests:
            amap.allowed(who, "write", d)
        return (time.process_time() - t0) / n * 1e6
    finally:
        await broker.stop()


async def _logins(user: str, n: int) -> float:
    broker = Broker(load_config_text(SECURED))
    await broker.start()
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            conn = await broker.connect(ConnectRequest(user, "benchpw"))
            await conn.close()
        return (time.perf_counter() - t0) / n * 1e3
    finally:
        await broker.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    off, on = [], []
    for _ in range(args.runs):
        off.append(asyncio.run(_send_path(OPEN, args.messages, None)))
        on.append(asyncio.run(_send_path(SECURED, args.messages, "plain")))
    print({
        "send_path_us_per_msg_no_security": [round(x, 2) for x in off],
        "send_path_us_per_msg_authorization": [round(x, 2) for x in on],
        "best_no_security": round(min(off), 2), "best_authorization": round(min(on), 2),
        "median_difference_us": round(statistics.median(on) - statistics.median(off), 2),
        "uncached_decision_us": round(asyncio.run(_decisions(20_000)), 2),
        "login_ms_scrypt_ln14": round(asyncio.run(_logins("bench", 20)), 1),
        "login_ms_plain": round(asyncio.run(_logins("plain", 200)), 2),
    })


if __name__ == "__main__":
    main()
