"""pytest fixtures for embedding RelayMQ (entry point `pytest11: relaymq`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from relaymq.broker.broker import Broker

try:  # explicit asyncio fixtures work with pytest-asyncio in strict and auto mode
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover - without pytest-asyncio, another async plugin runs them
    async_fixture = pytest.fixture  # type: ignore[assignment]
from relaymq.client import Connection, connect_broker
from relaymq.config.model import BrokerConfig
from relaymq.testing import external, parallel
from relaymq.testing.peers import activemq, rabbitmq  # noqa: F401 - session fixtures, once a run
from relaymq.testing.requirements import NOT_APPLICABLE, REQUIRE_ALL_ENV, require_all

if TYPE_CHECKING:
    from relaymq.testing.broker_pool import BrokerPool


@async_fixture
async def broker() -> AsyncIterator[Broker]:
    """A started embedded broker with the memory store and no network connectors."""
    b = Broker(BrokerConfig(persistent=False, scheduler_support=True))
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


@async_fixture
async def vm_connection(broker: Broker) -> AsyncIterator[Connection]:
    """A client connection to the `broker` fixture."""
    conn = await connect_broker(broker, client_id="test-client")
    try:
        yield conn
    finally:
        await conn.close()


# -- CI: a missing component fails instead of skipping (relaymq.testing.requirements) ------

_skipped_modules: list[str] = []


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _allowed(reason: str) -> bool:
    return reason.removeprefix("Skipped: ").startswith(NOT_APPLICABLE)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.when == "teardown" and item.nodeid in _kinds:
        report.user_properties.append((_KIND, _kinds[item.nodeid]))
    if report.failed:
        item.stash[_FAILED] = True
    if report.skipped and not hasattr(report, "wasxfail") and require_all():
        reason = _skip_reason(report)
        if not _allowed(reason):
            report.outcome = "failed"
            report.longrepr = (f"skipped in a run that requires every component "
                               f"({REQUIRE_ALL_ENV}=1): {reason}")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped and require_all():
        reason = _skip_reason(report)
        if not _allowed(reason):
            _skipped_modules.append(f"{report.nodeid}: {reason}")


# -- broker processes shared between scenarios (relaymq.testing.broker_pool) ---------------

_FAILED = pytest.StashKey[bool]()
_pools: list[BrokerPool] = []


def failed_so_far(item: pytest.Item) -> bool:
    """Whether `item` has failed so far (its setup or its call); a fixture's teardown
    asks it to know whether what the test used may be trusted again."""
    return item.stash.get(_FAILED, False)


@pytest.fixture(scope="session")
def relaymq_process_brokers() -> Iterator[BrokerPool]:
    """`relaymq run` children shared by the tests of this run whose configurations are
    the same, cleaned between them (`relaymq.testing.broker_pool`)."""
    from relaymq.testing.broker_pool import BrokerPool

    pool = BrokerPool()
    _pools.append(pool)
    try:
        yield pool
    finally:
        pool.close()


def note_process_test() -> None:
    """The running test works with a broker process it did not start itself (a shared
    one): count it as a *process* test (`--test-kinds`)."""
    if _current:
        _kinds[_current[0]] = "process"


def _pool_lines() -> list[str]:
    from relaymq.testing.broker_pool import describe

    return [f"shared broker processes (relaymq.testing.broker_pool): {describe(pool.stats)}"
            for pool in _pools]


_worker_pool_lines: list[str] = []  # under pytest-xdist: what each worker's pools did


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    lines = getattr(node, "workeroutput", {}).get("relaymq_pools", [])
    _worker_pool_lines.extend(f"{node.gateway.id}: {line}" for line in lines)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _pool_lines() + _worker_pool_lines:
        terminalreporter.line(line)
    if _kinds:
        counts = kind_counts()
        terminalreporter.section("tests by kind (--test-kinds)")
        terminalreporter.line(f"{'':28}" + "".join(f"{k:>12}" for k in KINDS))
        for area in sorted(counts):
            terminalreporter.line(f"{area:28}" + "".join(f"{counts[area][k]:>12}" for k in KINDS))
        totals = [sum(row[k] for row in counts.values()) for k in KINDS]
        terminalreporter.line(f"{'total':28}" + "".join(f"{n:>12}" for n in totals))
    if _skipped_modules:
        terminalreporter.section(f"modules skipped although {REQUIRE_ALL_ENV}=1", red=True)
        for line in _skipped_modules:
            terminalreporter.line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and _pools:
        workeroutput["relaymq_pools"] = _pool_lines()
    if _skipped_modules and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# -- what kind of test is this: in-process, socket, process --------------------------------
#
# `pytest --test-kinds` counts the tests by what they really do, seen through
# Python's audit events (sys.addaudithook): a test that started a process
# (subprocess.Popen: `relaymq run`, a crash worker, node) is a *process* test; one
# that connected a socket (a STOMP or AMQP client to a broker) is a *socket*
# test; anything else ran in-process (vm://, codecs, stores, parsers). The hook is
# installed only with the option: audit hooks cannot be removed.

KINDS = ("in-process", "socket", "process")
_KIND = "relaymq-test-kind"  # the teardown report's user property with the kind
_kinds: dict[str, str] = {}
_current: list[str] = []  # nodeid of the running test, empty between tests


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--test-kinds", action="store_true", default=False,
                     help="count tests by kind (in-process, socket, process) and print the counts")


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _current:
        return
    if event == "subprocess.Popen":
        _kinds[_current[0]] = "process"
    elif event == "socket.connect" and _kinds.get(_current[0]) != "process":
        _kinds[_current[0]] = "socket"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "transports(*names): run a semantics scenario over these "
                                       "transports (relaymq's core/tests/semantics)")
    external.configure(config)
    parallel.start_controller(config)
    if config.getoption("--test-kinds", default=False):
        import sys

        sys.addaudithook(_audit)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    if item.config.getoption("--test-kinds", default=False):
        _current[:] = [item.nodeid]
        _kinds.setdefault(item.nodeid, "in-process")
    try:
        yield
    finally:
        _current.clear()


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    external.mark_items(items)
    parallel.write_units(items)  # an xdist worker of `--dist loadgroup`: peers' modules


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: modules as units, each peer's modules as one, peers first
    (relaymq.testing.parallel)."""
    if config.getoption("dist", "no") == "loadgroup":
        return parallel.make_scheduler(config, log)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> None:
    external.note_fixture(fixturedef, request)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    result = yield
    if (why := external.unmarked_peers(item)) is not None:
        pytest.fail(why, pytrace=False)
    return result


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count the kinds from the reports: under pytest-xdist the workers run the tests
    and the controller only sees their reports."""
    for name, value in report.user_properties:
        if name == _KIND:
            _kinds[report.nodeid] = str(value)


def kind_counts() -> dict[str, dict[str, int]]:
    """{package or top directory: {kind: count}} for the tests run so far."""
    out: dict[str, dict[str, int]] = {}
    for nodeid, kind in _kinds.items():
        parts = nodeid.split("/")
        area = "/".join(parts[:2]) if parts[0] == "plugins" else parts[0]
        row = out.setdefault(area, dict.fromkeys(KINDS, 0))
        row[kind] += 1
    return out
