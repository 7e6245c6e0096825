"""A postAck that arrives before its message is kept in the target's store: a
target killed with -9 and restarted still applies it when the message comes.

A proton client plays the source broker (as Artemis sends), the target is a
`relaymq run` process (kahaDB)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from mirrortools import BrokerProcess, mirror_event
from proton.reactor import Copy
from proton.utils import BlockingConnection
from relaymq.testing.waits import wait_until_async
from relaymq_amqp.outgoing import AmqpConnection

SNF = "$ACTIVEMQ_ARTEMIS_MIRROR_relaymq"


def _message(body: str, ident: int) -> bytes:
    return mirror_event(body, {"x-opt-amq-mr-id": ident, "x-opt-amq-mr-dst": "q"})


def _post_ack(ident: int) -> bytes:
    return mirror_event(ident, **{"x-opt-amq-mr-ev-type": "postAck", "x-opt-amq-mr-adr": "q",
                            "x-opt-amq-mr-qu": "q"})


def browse(url: str, address: str) -> list[str]:
    """The bodies `address` holds, without consuming them."""
    conn = BlockingConnection(url, timeout=30)
    try:
        rcv = conn.create_receiver(address, options=Copy(), credit=100)
        got = []
        while True:
            try:
                m = rcv.receive(timeout=0.5)
            except Exception:  # noqa: BLE001 - a receive timeout: nothing more
                break
            got.append(str(m.body))
            rcv.accept()
        rcv.close()
        return got
    finally:
        conn.close()


async def _mirror_link(b: BrokerProcess, node: str) -> tuple[AmqpConnection, Any]:
    conn = AmqpConnection(f"tcp://127.0.0.1:{b.port}", retry_interval=0.1, container_id=node)
    await conn.connect()
    sender = await conn.open_sender(
        SNF, name=f"{SNF}:{uuid.uuid4()}", source_address=SNF,
        properties={"x-opt-amq-bkr-id": node}, desired_capabilities=["amq.mirror"],
        rcv_settle_first=True)
    return conn, sender


async def test_a_pending_post_ack_survives_a_target_kill_9(tmp_path: Path) -> None:
    node = str(uuid.uuid4())
    # looks a minute apart: the postAck stays pending until the broker is killed
    b = BrokerProcess(tmp_path, "b", args=["-D", "mirrorAckManagerRetryDelay=60000"]).start()
    try:
        conn, sender = await _mirror_link(b, node)
        try:
            kept = await sender.send(_message("kept", 1))
            # the acknowledgement of message 777 comes before the message itself
            early = await sender.send(_post_ack(777))
            assert (kept.state, early.state) == ("accepted", "accepted")
        finally:
            await conn.close()
        b.kill9()  # the postAck was accepted: it must be stored
        b.start()
        conn, sender = await _mirror_link(b, node)
        try:
            late = await sender.send(_message("acknowledged before it came", 777))
            other = await sender.send(_message("another", 778))
            assert (late.state, other.state) == ("accepted", "accepted")
            # 777 arrives after its postAck (kept across the kill): it is removed at once
            await wait_until_async(
                lambda: sorted(browse(b.url, "queue://q")) == ["another", "kept"],
                what="message 777 removed by the postAck stored before the kill", timeout=30)
        finally:
            await conn.close()
    finally:
        b.stop()


async def test_without_its_message_a_post_ack_is_given_up_and_forgotten(tmp_path: Path) -> None:
    """A pending postAck whose message never comes is counted after its attempts
    and its record removed: a restart does not bring it back."""
    node = str(uuid.uuid4())
    args = ["-D", "mirrorAckManagerRetryDelay=20", "-D", "mirrorAckManagerQueueAttempts=2"]
    b = BrokerProcess(tmp_path, "b", args=args).start()
    try:
        conn, sender = await _mirror_link(b, node)
        try:
            assert (await sender.send(_message("kept", 1))).state == "accepted"
            assert (await sender.send(_post_ack(555))).state == "accepted"
            await wait_until_async(lambda: "postAck named message 555" in b.output(),
                                   what="the postAck given up", timeout=30)
        finally:
            await conn.close()
        b.stop()
        b.start()
        conn, sender = await _mirror_link(b, node)
        try:
            assert (await sender.send(_message("came too late", 555))).state == "accepted"
            await wait_until_async(
                lambda: sorted(browse(b.url, "queue://q")) == ["came too late", "kept"],
                what="message 555 kept (its postAck was given up before)", timeout=30)
            assert "waiting for their message since before the restart" not in b.output()
        finally:
            await conn.close()
    finally:
        b.stop()
