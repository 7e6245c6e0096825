"""The pytest plugin shipped with relaymq: `broker` and `vm_connection` fixtures."""

from __future__ import annotations

from relaymq.broker.broker import Broker


async def test_broker_and_vm_connection_fixtures(broker: Broker, vm_connection) -> None:
    assert broker.started and broker.store is not None and not broker.store.persistent
    await vm_connection.send("queue://FIXTURE", "hello", properties={"n": 1})
    consumer = await vm_connection.consumer("queue://FIXTURE", selector="n = 1")
    msg = await consumer.receive(1)
    assert msg is not None and msg.text == "hello"
    assert broker.queue_size("FIXTURE") == 0
