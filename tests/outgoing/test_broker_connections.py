"""`<broker-connections><amqp-connection>`: the broker opens the connection
through `broker.outgoing`, keeps retrying a peer that is down, and fires
`relaymq_broker_connection_started` each time it opens."""

from __future__ import annotations

import asyncio
from typing import Any

from relaymq.broker.broker import Broker
from relaymq.config.loader import load_config_text
from relaymq.hookspecs import hookimpl
from relaymq.testing import free_port_below_ephemeral as free_port
from relaymq.testing import running_broker


async def until(cond: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


class Started:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    @hookimpl
    def relaymq_broker_connection_started(self, name: str, uri: str) -> None:
        self.calls.append((name, uri))


async def test_broker_connection_waits_for_its_peer_and_fires_the_hook() -> None:
    port = free_port()
    config = load_config_text(f"""<broker persistent="false">
  <broker-connections>
    <amqp-connection uri="tcp://127.0.0.1:{port}" name="dc2" retry-interval="50"/>
  </broker-connections>
</broker>""", "xml")
    local = Broker(config, strict=True)
    started = Started()
    local.plugins.register(started)
    await local.start()  # the peer is down: start-up does not wait for it
    try:
        await until(lambda: local.outgoing.list() and local.outgoing.list()[0].failures >= 1,
                    what="a failed attempt")
        (info,) = local.outgoing.list()
        assert (info.name, info.scheme, info.owner) == ("dc2", "tcp", "broker connection dc2")
        assert info.state in ("connecting", "retrying") and started.calls == []
        async with running_broker(None, f"amqp://127.0.0.1:{port}"):
            await until(lambda: local.outgoing.list()[0].state == "open", what="the connection")
            assert started.calls == [("dc2", f"tcp://127.0.0.1:{port}")]
            assert local.outgoing.list()[0].peer == f"tcp://127.0.0.1:{port}"
    finally:
        await local.stop()
    assert local.outgoing.list() == []
