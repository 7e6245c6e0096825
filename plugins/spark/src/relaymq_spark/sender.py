"""The sink's sender: encoded AMQP messages to the broker over relaymq-amqp's own
outgoing connection (`relaymq_amqp.outgoing.AmqpConnection`, what bridges,
federation and mirrors use), not python-qpid-proton's event loop.

One connection and one anonymous-relay sender per call (a Spark task);
up to `window` messages are unsettled at once, the next ones are encoded while
the earlier ones travel, and the engine writes what is ready in one socket
write per loop turn. Each message is settled ``accepted`` by the broker only
once stored; anything else (rejected, released, modified, a lost connection)
fails the call with `RelayMQError`, and Spark runs the task again (the
duplicate ids make the repeat harmless).

    n = send_encoded(endpoint, iter(encoded_messages), window=1000)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

from relaymq_spark.endpoint import Endpoint, RelayMQError, ssl_context

#: messages handed to the engine between two turns of the event loop
CHUNK = 256


class _Progress:
    """Counts outcomes; wakes the sending loop when the window has room again."""

    def __init__(self, low: int) -> None:
        self.low = low
        self.inflight = 0
        self.accepted = 0
        self.error: str | None = None
        self.wake = asyncio.Event()

    def settled(self, outcome: Any) -> None:
        self.inflight -= 1
        if isinstance(outcome, BaseException):
            self.fail(f"connection lost before the broker stored every message: {outcome}")
        elif outcome.state == "accepted":
            self.accepted += 1
        elif outcome.state == "rejected":
            cond = outcome.condition
            self.fail(f"send rejected: {cond}" if cond is not None else "send rejected")
        else:
            self.fail(f"send {outcome.state} by the broker (not stored)")
        if self.inflight <= self.low:
            self.wake.set()

    def fail(self, why: str) -> None:
        if self.error is None:
            self.error = why
        self.wake.set()



def send_encoded(ep: Endpoint, messages: Iterator[bytes], window: int = 1000,
                 rate: float | None = None) -> int:
    """Send each encoded message (its `to` names the destination); returns how
    many the broker accepted (all of them, or this raises). `rate`: at most that
    many messages a second, spread evenly (the connection keeps working while it
    waits: heartbeats, outcomes)."""
    return asyncio.run(_send(ep, messages, max(1, window), rate if rate and rate > 0 else None))


async def _send(ep: Endpoint, messages: Iterator[bytes], window: int,
                rate: float | None = None) -> int:
    from relaymq.spi.outgoing import AuthenticationFailed, OutgoingError
    from relaymq_amqp.outgoing import AmqpConnection

    user, password = ep.credentials()
    url = ep.host_url()
    conn = AmqpConnection(url, user=user, password=password if user else None,
                          reconnect_attempts=0, connect_timeout=ep.timeout,
                          ssl_context=ssl_context(ep), name="relaymq-spark-sink")
    try:
        try:
            await asyncio.wait_for(conn.connect(), ep.timeout)
            sender = await asyncio.wait_for(conn.open_sender(None), ep.timeout)
        except AuthenticationFailed as exc:
            raise RelayMQError(f"authentication failed at {url} ({exc})") from None
        except (OutgoingError, OSError, TimeoutError) as exc:
            raise RelayMQError(f"{url}: {exc}", retryable=True) from None
        progress = _Progress(max(1, window // 2))
        settled = progress.settled
        send = sender.send_with
        n = 0
        started = time.monotonic()
        for data in messages:
            if progress.error is not None:
                break
            if rate is not None:  # message n leaves no earlier than n / rate s after the start
                ahead = started + n / rate - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)
            if progress.inflight >= window:
                progress.wake.clear()
                await _wait(progress, ep, url)
                if progress.error is not None:
                    break
            send(data, settled)
            progress.inflight += 1
            n += 1
            if n % CHUNK == 0:
                await asyncio.sleep(0)  # let the engine write and read outcomes meanwhile
        while progress.error is None and progress.inflight > 0:
            progress.wake.clear()
            progress.low = 0
            await _wait(progress, ep, url)
        if progress.error is not None:
            raise RelayMQError(progress.error, retryable="connection lost" in progress.error)
        return progress.accepted
    finally:
        await conn.close()


async def _wait(progress: _Progress, ep: Endpoint, url: str) -> None:
    try:
        await asyncio.wait_for(progress.wake.wait(), ep.timeout)
    except TimeoutError:
        progress.fail(f"no answer from {url} within {ep.timeout:g} s")
