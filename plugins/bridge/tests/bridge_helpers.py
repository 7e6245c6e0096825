"""Helpers for bridge tests: real brokers (in-process on loopback sockets, or
`relaymq run` processes for kill -9), and a producer/consumer that use the
outgoing client over real sockets."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relaymq.model.destination import Destination
from relaymq.model.message import BodyType, Message
from relaymq.outgoing import OutgoingConnections
from relaymq.spi.outgoing import ConnectOptions, Delivery
from relaymq.testing.peers import free_port, wait_port  # noqa: F401 - re-exported for the tests

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


async def until(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def message(n: int, dest: str = "queue://src", timestamp: int = 0, **props: Any) -> Message:
    return Message(f"m-{n}".encode(), destination=Destination.parse(dest), body_type=BodyType.TEXT,
                   message_id=f"ID:producer-{n}", timestamp=timestamp,
                   durable=True, properties={"n": n, **props})


async def produce(uri: str, address: str, count: int, start: int = 0,
                  options: ConnectOptions | None = None, timestamp: int = 0,
                  **props: Any) -> None:
    reg = OutgoingConnections()
    conn = await reg.connect(uri, options)
    try:
        sender = await (await conn.session()).open_sender(address)
        futures = [sender.send(message(i, timestamp=timestamp, **props))
                   for i in range(start, start + count)]
        outcomes = await asyncio.gather(*futures)
        assert all(o.accepted for o in outcomes), outcomes
    finally:
        await conn.close()


class Drain:
    """Consume everything from `address`, accepting it; `bodies` in arrival order."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.reg = OutgoingConnections()
        self.conn: Any = None

    @property
    def bodies(self) -> list[str]:
        return [bytes(d.message.body).decode() for d in self.deliveries]

    async def start(self, uri: str, address: str, options: ConnectOptions | None = None) -> Drain:
        self.conn = await self.reg.connect(uri, options)

        def got(d: Delivery) -> None:
            self.deliveries.append(d)
            d.accept()

        await (await self.conn.session()).open_receiver(address, got, credit=500)
        return self

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()


def broker_xml(tmp: Path, stomp_port: int, amqp_port: int, name: str = "target",
               extra: str = "") -> Path:
    cfg = tmp / f"{name}.xml"
    (tmp / name).mkdir(exist_ok=True)
    cfg.write_text(f"""<beans><broker xmlns="http://activemq.apache.org/schema/core" brokerName="{name}">
  <persistenceAdapter><kahaDB directory="{tmp / name / 'kahadb'}"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp_port}"/>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{amqp_port}"/>
  </transportConnectors>
  {extra}
</broker></beans>""")
    return cfg


def start_relaymq(cfg: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    wait_port(port, proc)
    return proc
