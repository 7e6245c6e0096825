"""`<amqp-connection auto-start="false">` waits for management's
`start_broker_connection` (Artemis' startBrokerConnection), and the listing
shows whether it is connected, to which host, and its retries."""

from __future__ import annotations

import asyncio
from typing import Any

from relaymq.config.model import PluginElement
from relaymq.testing import broker_config, free_port


async def wait_for(check: Any, timeout: float = 10.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.05)


def info(bt: Any, name: str) -> Any:
    return next(c for c in bt.call(lambda: bt.broker.management.broker_connections()) if c.name == name)


async def test_auto_start_false_waits_for_management(make_broker: Any) -> None:
    target = make_broker("amqp://127.0.0.1:0")
    dead = free_port()
    cfg = broker_config("amqp://127.0.0.1:0")
    cfg.broker_connections = [
        PluginElement("amqp-connection", {"uri": f"tcp://{target.address()}", "name": "dc2",
                                          "auto-start": "false", "retry-interval": "100"}),
        PluginElement("amqp-connection", {"uri": f"tcp://127.0.0.1:{dead}#tcp://{target.address()}",
                                          "name": "failover", "retry-interval": "100"}),
    ]
    source = make_broker(config=cfg)
    dc2 = info(source, "dc2")
    assert dc2.state == "stopped"
    assert dc2.detail["connected"] is False and dc2.detail["auto_start"] is False
    before = len(target.call(lambda: target.broker.management.connections()))

    source.run(source.broker.management.start_broker_connection("dc2"))
    await wait_for(lambda: info(source, "dc2").detail["connected"])
    dc2 = info(source, "dc2")
    assert dc2.state == "open"
    assert dc2.detail["target"] == f"tcp://{target.address()}"
    assert dc2.detail["operations"] == []

    # the failover list: the first host is down, the second answers
    await wait_for(lambda: info(source, "failover").detail["connected"])
    fo = info(source, "failover")
    assert fo.detail["target"] == f"tcp://{target.address()}"
    assert fo.detail["retries"] >= 1

    source.run(source.broker.management.stop_broker_connection("dc2"))
    dc2 = info(source, "dc2")
    assert dc2.state == "stopped" and dc2.detail["connected"] is False
    # started again after a stop
    source.run(source.broker.management.start_broker_connection("dc2"))
    await wait_for(lambda: info(source, "dc2").detail["connected"])
    assert len(target.call(lambda: target.broker.management.connections())) >= before + 1
