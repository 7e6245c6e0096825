"""A mirror target stops cleanly: the task looking for a pending postAck's message
is cancelled when the broker stops, not left behind on the broker's loop."""

from __future__ import annotations

import asyncio
import gc
import logging
import uuid
from typing import Any

import pytest
from mirrortools import mirror_event
from relaymq.testing.waits import wait_until_async
from relaymq_amqp.outgoing import AmqpConnection
from relaymq_mirror import retries

NODE = str(uuid.uuid4())
SNF = "$ACTIVEMQ_ARTEMIS_MIRROR_relaymq"


def _retries(b: Any) -> list[asyncio.Task[Any]]:
    def read() -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks() if "AckRetries._run" in repr(t.get_coro())]
    return list(b.call(read))


async def test_broker_stop_cancels_a_pending_post_ack_retry(
        brokers: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(retries, "ACK_RETRY_DELAY", 30.0)  # pending until the broker stops
    b = brokers()
    conn = AmqpConnection(f"tcp://{b.address}", retry_interval=0.1, container_id=NODE)
    await conn.connect()
    try:
        sender = await conn.open_sender(
            SNF, name=f"{SNF}:{uuid.uuid4()}", source_address=SNF,
            properties={"x-opt-amq-bkr-id": NODE},
            desired_capabilities=["amq.mirror", "AMQ_CORE_MESSAGE_TUNNELING"],
            rcv_settle_first=True)
        stored = await sender.send(mirror_event("m", {"x-opt-amq-mr-id": 1, "x-opt-amq-mr-dst": "q"}))
        # a postAck for a message that is not here (yet): accepted, then retried
        ack = await sender.send(mirror_event(424242, **{"x-opt-amq-mr-ev-type": "postAck",
                                                  "x-opt-amq-mr-adr": "q",
                                                  "x-opt-amq-mr-qu": "q"}))
        assert (stored.state, ack.state) == ("accepted", "accepted")
        await wait_until_async(lambda: len(_retries(b)) == 1, what="the postAck retry to be pending")
        with caplog.at_level(logging.DEBUG, logger="asyncio"):
            b.run(b.broker.stop())

            async def others() -> list[str]:
                return [repr(t) for t in asyncio.all_tasks() if t is not asyncio.current_task()]

            assert b.run(others) == []
            b.stop()  # the loop ends
            gc.collect()
        assert not [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
    finally:
        await conn.close()
