"""Brokers for the messaging-semantics tests, built the way users configure them.

A scenario runs over vm:// only, unless it names more transports with
`@over("vm", "stomp", "amqp")`: then it runs once per transport, and `connect`
gives a client of that transport (`relaymq.testing.transports`) to a broker with that
transport's connector on a free port. The scenario's code is the same for all.

Each socket transport also runs against a broker PROCESS (`stomp-process`,
`amqp-process`): `make_broker` then starts `relaymq run` with the scenario's config
(`relaymq.testing.broker_proxy.ProcessBroker`, one child per broker the scenario
makes, listening for STOMP and AMQP, and shared with later scenarios of the same
config once cleaned: `relaymq.testing.broker_pool`) and gives a stand-in that
answers `connector_address`, `queue_size` and `destination_stats` over the child's
REST API. A scenario that needs more of the
in-process broker (a barrier, a fake clock, its region) says
`@over(..., process=False)`; docs/testing.md lists them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig, DeadLetterStrategyConfig, PolicyEntryConfig
from relaymq.testing.broker_pool import BrokerPool
from relaymq.testing.broker_proxy import ProcessBroker, console_missing
from relaymq.testing.pytest_plugin import failed_so_far, note_process_test
from relaymq.testing.transports import (
    PROCESS,
    TRANSPORTS,
    base_transport,
    connect_over,
    transport_params,
    with_connector,
    with_socket_connectors,
)


def over(*names: str, process: bool = True) -> pytest.MarkDecorator:
    """Run a scenario over these transports (default: vm only); each socket transport
    also against a broker process unless `process` is False."""
    assert set(names) <= set(TRANSPORTS), names
    return pytest.mark.transports(*names, process=process)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "transport" in metafunc.fixturenames:
        metafunc.parametrize("transport",
                             transport_params(metafunc.definition.get_closest_marker("transports")))


@pytest.fixture
async def make_broker(transport: str, tmp_path_factory: pytest.TempPathFactory,
                      request: pytest.FixtureRequest) -> AsyncIterator[Callable[..., Any]]:
    brokers: list[Broker] = []
    processes: list[ProcessBroker] = []
    base = base_transport(transport)
    pool: BrokerPool | None = None
    if transport.endswith(PROCESS):
        if (missing := console_missing()) is not None:
            pytest.skip(missing)
        pool = request.getfixturevalue("relaymq_process_brokers")

    async def make(config: BrokerConfig | None = None, **fields: Any) -> Any:
        cfg = config or BrokerConfig(persistent=False, **fields)
        if pool is not None:
            p = await asyncio.to_thread(pool.acquire, with_socket_connectors(cfg),
                                        lambda: tmp_path_factory.mktemp("broker"))
            note_process_test()
            processes.append(p)
            return p
        b = Broker(with_connector(cfg, base))
        await b.start()
        brokers.append(b)
        return b

    yield make
    for b in brokers:
        await b.stop()
    for p in processes:
        assert pool is not None
        await asyncio.to_thread(pool.release, p, failed=failed_so_far(request.node))


@pytest.fixture
async def connect(transport: str, make_broker: Callable[..., Any]
                  ) -> AsyncIterator[Callable[..., Any]]:
    """`await connect(broker, client_id=...)`: a client of the scenario's transport
    (closed before `make_broker`'s brokers stop or go back to the shared pool)."""
    conns: list[Any] = []
    base = base_transport(transport)
    if base != "vm":
        pytest.importorskip({"stomp": "stomp", "amqp": "proton"}[base],
                            reason=f"the {base} client library is not installed")

    async def make(broker: Any, **kw: Any) -> Any:
        c = await connect_over(base, broker, **kw)
        conns.append(c)
        return c

    yield make
    for c in conns:
        await c.close()


def policy(queue: str | None = None, topic: str | None = None, **kw: Any) -> PolicyEntryConfig:
    return PolicyEntryConfig(queue=queue, topic=topic, **kw)


def dlq_strategy(**kw: Any) -> DeadLetterStrategyConfig:
    return DeadLetterStrategyConfig(**kw)
