"""pytest fixtures for embedding RelayMQ (entry point `pytest11: relaymq`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from relaymq.broker.broker import Broker

try:  # explicit asyncio fixtures work with pytest-asyncio in strict and auto mode
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover - without pytest-asyncio, another async plugin runs them
    async_fixture = pytest.fixture  # type: ignore[assignment]
from relaymq.client import Connection, connect_broker
from relaymq.config.model import BrokerConfig
from relaymq.testing.requirements import NOT_APPLICABLE, REQUIRE_ALL_ENV, require_all


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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _skipped_modules:
        terminalreporter.section(f"modules skipped although {REQUIRE_ALL_ENV}=1", red=True)
        for line in _skipped_modules:
            terminalreporter.line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped_modules and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
