"""Brokers built from activemq.xml text, as users configure them.

``await start(entries=[...], body=...)`` wraps ``entries`` (children of
``<virtualDestinations>``) in ``<destinationInterceptors>`` and adds ``body``
(other ``<broker>`` children) verbatim; with neither, the broker has no
``<destinationInterceptors>`` at all (the documented default applies).

A test marked ``@pytest.mark.transports("vm", "stomp", "amqp")`` runs once per
transport: the broker also listens for it and ``connect`` gives a client of it
(``relaymq.testing.transports``); unmarked tests run over vm:// only. Each socket
transport runs again against a broker process (``stomp-process``, ``amqp-process``):
``start`` then runs ``relaymq run`` on the same configuration and gives a stand-in
that answers ``connector_address``, ``queue_size`` and ``destination_stats`` over its
REST API (``relaymq.testing.broker_proxy``); tests with the same configuration share
a process, cleaned between them (``relaymq.testing.broker_pool``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.client import ClientConsumer, Connection
from relaymq.config.loader import load_config_text
from relaymq.config.model import BrokerConfig
from relaymq.testing.barriers import before_marker
from relaymq.testing.broker_pool import BrokerPool
from relaymq.testing.broker_proxy import ProcessBroker, console_missing
from relaymq.testing.pytest_plugin import failed_so_far, note_process_test
from relaymq.testing.transports import (
    PROCESS,
    base_transport,
    connect_over,
    transport_params,
    with_connector,
    with_socket_connectors,
)

BROKER = ('<broker xmlns="http://activemq.apache.org/schema/core" brokerName="vt" '
          'persistent="false">{body}</broker>')


def broker_xml(entries: list[str] | None = None, body: str = "") -> str:
    interceptors = ""
    if entries is not None:
        interceptors = ("<destinationInterceptors><virtualDestinationInterceptor>"
                        "<virtualDestinations>" + "".join(entries) + "</virtualDestinations>"
                        "</virtualDestinationInterceptor></destinationInterceptors>")
    return BROKER.format(body=interceptors + body)


StartBroker = Callable[..., Awaitable[Broker]]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "transport" in metafunc.fixturenames:
        metafunc.parametrize("transport",
                             transport_params(metafunc.definition.get_closest_marker("transports")))


@pytest.fixture
async def start(transport: str, tmp_path_factory: pytest.TempPathFactory,
                request: pytest.FixtureRequest) -> AsyncIterator[StartBroker]:
    brokers: list[Broker] = []
    processes: list[ProcessBroker] = []
    base = base_transport(transport)
    pool: BrokerPool | None = None
    if transport.endswith(PROCESS):
        if (missing := console_missing()) is not None:
            pytest.skip(missing)
        pool = request.getfixturevalue("relaymq_process_brokers")

    async def _start(entries: list[str] | None = None, body: str = "", *,
                     config: BrokerConfig | None = None, strict: bool = True) -> Any:
        cfg = config or load_config_text(broker_xml(entries, body), filename="activemq.xml",
                                         strict=strict)
        if pool is not None:
            process = await asyncio.to_thread(pool.acquire, with_socket_connectors(cfg),
                                              lambda: tmp_path_factory.mktemp("vt"))
            note_process_test()
            processes.append(process)
            return process
        broker = Broker(with_connector(cfg, base), strict=strict)
        await broker.start()
        brokers.append(broker)
        return broker

    yield _start
    for broker in reversed(brokers):
        await broker.stop()
    for process in processes:
        assert pool is not None
        await asyncio.to_thread(pool.release, process, failed=failed_so_far(request.node))


@pytest.fixture
def paths() -> dict[int, tuple[Any, Any, str | None]]:
    """What each consumer made through `connect` consumes: id(consumer) ->
    (its client, its destination, its selector)."""
    return {}


@pytest.fixture
async def connect(transport: str, paths: dict[int, tuple[Any, Any, str | None]],
                  start: StartBroker) -> AsyncIterator[Callable[..., Awaitable[Connection]]]:
    """``await connect(broker)``: a client of the test's transport (closed at the end,
    before ``start``'s brokers stop or go back to the shared pool)."""
    base = base_transport(transport)
    if base != "vm":
        pytest.importorskip({"stomp": "stomp", "amqp": "proton"}[base],
                            reason=f"the {base} client library is not installed")
    opened: list[Any] = []

    async def _connect(broker: Any, **kw: Any) -> Any:
        c = await connect_over(base, broker, **kw)
        opened.append(c)
        make = c.consumer

        async def consumer(destination: Any, *args: Any, **options: Any) -> Any:
            made = await make(destination, *args, **options)
            paths[id(made)] = (c, destination, options.get("selector"))
            close = made.close

            async def closed() -> None:  # a closed consumer no longer shares its queue
                paths.pop(id(made), None)
                await close()

            made.close = closed
            return made

        c.consumer = consumer
        return c

    yield _connect
    for c in opened:
        await c.close()


@pytest.fixture
def texts(paths: dict[int, tuple[Any, Any, str | None]],
          ) -> Callable[..., Awaitable[list[str]]]:
    """``await texts(consumer)``: the bodies the consumer received, up to a marker its
    client sends to its destination (``relaymq.testing.barriers``), so a copy that
    comes late, or twice, is counted. The marker must reach this consumer: a
    consumer with a selector, or one sharing its queue with another open consumer,
    needs ``properties=`` that only it selects (further keywords go to the marker's
    send, e.g. ``priority=``). A consumer no marker can be aimed at (on a wildcard,
    or sharing its queue without a selector) fails the test: wait for what must come
    and read the destination's counters instead, or aim a marker yourself."""

    def aim(consumer: ClientConsumer, told: bool) -> tuple[Any, Any]:
        found = paths.get(id(consumer))
        if found is None:
            raise AssertionError("texts() needs a consumer made through the connect fixture")
        client, destination, selector = found
        key = str(destination)
        shared = [p for p in paths.values() if str(p[1]) == key]
        if "*" in key or ">" in key:
            raise AssertionError(f"texts() cannot aim a marker at a consumer of {key}")
        if not told and (selector is not None or (key.startswith("queue://") and len(shared) > 1)):
            raise AssertionError(f"texts() needs properties= for the marker: the consumer of "
                                 f"{key} has a selector ({selector!r}) or shares the queue")
        return client, destination

    async def _texts(consumer: ClientConsumer, *, properties: dict[str, Any] | None = None,
                     **send_options: Any) -> list[str]:
        client, destination = aim(consumer, properties is not None or bool(send_options))
        return await before_marker(client, destination, consumer, properties=properties,
                                   **send_options)

    return _texts
