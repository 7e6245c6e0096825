"""A postAck that arrives before its message is kept in the target's store: a
target killed with -9 and restarted still applies it when the message comes,
whichever way it comes.

A proton client plays the source broker (as Artemis sends), the target is a
`relaymq run` process (kahaDB)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from mirrortools import BrokerProcess, mirror_event, send
from proton.reactor import Copy
from proton.utils import BlockingConnection
from relaymq.testing.waits import wait_until_async
from relaymq_amqp.outgoing import AmqpConnection
from relaymq_mirror.wire import internal_id

SNF = "$ACTIVEMQ_ARTEMIS_MIRROR_relaymq"


def _message(body: str, ident: int, origin: str | None = None) -> bytes:
    """A mirrored message; `origin`: the broker it came from first (another than
    the link's, as in a ring)."""
    instructions: dict[str, Any] = {"x-opt-amq-mr-id": ident, "x-opt-amq-mr-dst": "q"}
    if origin is not None:
        instructions["x-opt-amq-bkr-id"] = origin
    return mirror_event(body, instructions)


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


def _state(b: BrokerProcess) -> str:
    """What a failed wait shows: the queue and the broker's output."""
    return f"queue q holds {browse(b.url, 'queue://q')}; the broker said:\n{b.output()[-4000:]}"


async def _mirror_link(b: BrokerProcess, node: str) -> tuple[AmqpConnection, Any]:
    conn = AmqpConnection(f"tcp://127.0.0.1:{b.port}", retry_interval=0.1, container_id=node)
    await conn.connect()
    sender = await conn.open_sender(
        SNF, name=f"{SNF}:{uuid.uuid4()}", source_address=SNF,
        properties={"x-opt-amq-bkr-id": node}, desired_capabilities=["amq.mirror"],
        rcv_settle_first=True)
    return conn, sender


async def test_a_pending_post_ack_survives_a_target_kill_9_and_is_applied_from_any_path(
        tmp_path: Path) -> None:
    """After the restart the pending postAcks are looked for before any mirror link
    is back (a message that comes another way is found on the timer), and one whose
    message comes over another source broker's link (a ring: it reached C first) is
    applied at once, though the link of the broker that sent the postAck never returns."""
    node_a, node_c = str(uuid.uuid4()), str(uuid.uuid4())
    # many attempts: a postAck stays pending until its message comes; looks a second
    # apart: the client's message is browsed (by the waits below) before it is looked for
    args = ["-D", "mirrorAckManagerRetryDelay=1000", "-D", "mirrorAckManagerQueueAttempts=1000"]
    b = BrokerProcess(tmp_path, "b", args=args).start()
    try:
        conn, sender = await _mirror_link(b, node_a)
        try:
            kept = await sender.send(_message("kept", 1))
            # acknowledgements on A of messages B has not received yet
            early = await sender.send(_post_ack(777))
            other = await sender.send(_post_ack(internal_id("ID:by-a-client")))
            assert (kept.state, early.state, other.state) == ("accepted",) * 3, _state(b)
        finally:
            await conn.close()
        b.kill9()  # the postAcks were accepted: they must be stored
        b.start()
        # no mirror link is up: a message that comes another way is found on the timer
        send(b.url, "queue://q", ["sent by a client"], ids=["ID:by-a-client"])
        await wait_until_async(lambda: browse(b.url, "queue://q") == ["kept"],
                               what="the client's message removed by the postAck kept across "
                                    "the kill, with no mirror link up", timeout=30,
                               detail=lambda: _state(b))
        conn, sender = await _mirror_link(b, node_c)  # A's link does not come back
        try:
            late = await sender.send(_message("acknowledged on A before it came", 777,
                                              origin=node_a))
            another = await sender.send(_message("another", 778, origin=node_a))
            assert (late.state, another.state) == ("accepted", "accepted")
            await wait_until_async(
                lambda: sorted(browse(b.url, "queue://q")) == ["another", "kept"],
                what="message 777, come over C's link, removed by A's pending postAck", timeout=30,
                detail=lambda: _state(b))
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
