"""Bounded condition waits for tests: poll until true, fail the test on timeout.

Tests never sleep and then assert: a slow machine makes such a test fail, a fast
one makes it pass without checking anything. They wait for the condition they
are about to assert, with a generous bound, and the wait raises `AssertionError`
(naming what was awaited and what was last seen) when the bound runs out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 20.0  # generous: two loaded cores shared with other jobs


def _fail(what: str, timeout: float, last: Any, detail: Callable[[], str] | None = None
          ) -> AssertionError:
    more = f"\n{detail()}" if detail is not None else ""
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}; last seen: "
                          f"{last!r}{more}")


def wait_until(probe: Callable[[], T], what: str = "the condition",
               timeout: float = DEFAULT_TIMEOUT, interval: float = 0.02,
               detail: Callable[[], str] | None = None) -> T:
    """Call `probe` until it returns something true; return that, or raise AssertionError
    (with what `detail()` says, e.g. a broker process's output, appended)."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _fail(what, timeout, last, detail)
        time.sleep(interval)


async def wait_until_async(probe: Callable[[], T], what: str = "the condition",
                           timeout: float = DEFAULT_TIMEOUT, interval: float = 0.01,
                           detail: Callable[[], str] | None = None) -> T:
    """`wait_until` for tests on the event loop: polls without blocking it."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _fail(what, timeout, last, detail)
        await asyncio.sleep(interval)


def wait_equal(probe: Callable[[], Any], expected: Any, what: str = "the value",
               timeout: float = DEFAULT_TIMEOUT, interval: float = 0.02) -> None:
    """Poll `probe` until it returns `expected`; raise AssertionError with the last value."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last == expected:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} == "
                                 f"{expected!r}; last seen: {last!r}")
        time.sleep(interval)


async def wait_equal_async(probe: Callable[[], Any], expected: Any, what: str = "the value",
                           timeout: float = DEFAULT_TIMEOUT, interval: float = 0.01) -> None:
    """`wait_equal` for tests on the event loop."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last == expected:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} == "
                                 f"{expected!r}; last seen: {last!r}")
        await asyncio.sleep(interval)
