"""`relaymq.broker.eager`: running a coroutine by hand until it first waits."""

from __future__ import annotations

import asyncio

import pytest
from relaymq.broker.eager import Resume, start
from relaymq.testing import wait_until_async


async def _quick(x: int) -> int:
    return x * 2


async def _slow(fut: asyncio.Future[int], log: list[str]) -> int:
    log.append("before")
    value = await fut
    log.append("after")
    return value + 1


async def test_a_coroutine_that_never_waits_finishes_in_start() -> None:
    assert start(_quick(21)) == (True, 42)


async def test_a_waiting_coroutine_finishes_in_a_task_with_its_value() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    log: list[str] = []
    coro = _slow(fut, log)
    finished, waiting = start(coro)
    assert not finished and waiting is fut and log == ["before"]
    started = asyncio.Event()
    task = loop.create_task(_await(Resume(coro, waiting), started))
    await asyncio.wait_for(started.wait(), 10)  # the task now waits on fut
    assert not task.done()
    fut.set_result(9)
    assert await task == 10 and log == ["before", "after"]


async def test_cancelling_the_task_cancels_the_coroutine() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    log: list[str] = []
    coro = _slow(fut, log)
    _, waiting = start(coro)
    started = asyncio.Event()
    task = loop.create_task(_await(Resume(coro, waiting), started))
    await asyncio.wait_for(started.wait(), 10)  # the task now waits on fut
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["before"] and fut.cancelled()


async def test_errors_propagate_from_start_and_from_resume() -> None:
    async def boom() -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        start(boom())
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    coro = _slow(fut, [])
    _, waiting = start(coro)
    fut.set_exception(KeyError("gone"))
    with pytest.raises(KeyError):
        await Resume(coro, waiting)


async def test_two_coroutines_started_on_one_future_both_finish() -> None:
    """Acks of one loop turn share one store-removal future; two connections
    starting their ACK handling in that turn both wait on it. The second used to
    fail in `start` with "await wasn't used with future"."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    logs: list[list[str]] = [[], [], []]
    coros = [_slow(fut, log) for log in logs[:2]]
    tasks = []
    started = [asyncio.Event() for _ in coros]
    for coro, event in zip(coros, started, strict=True):
        finished, waiting = start(coro)
        assert not finished and waiting is fut
        tasks.append(loop.create_task(_await(Resume(coro, waiting), event)))
    plain = loop.create_task(_slow(fut, logs[2]))  # an ordinary task on it too
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), 10)
    await wait_until_async(lambda: logs[2] == ["before"], "the plain task to wait")
    assert not any(t.done() for t in tasks)
    fut.set_result(1)
    assert await asyncio.gather(*tasks, plain) == [2, 2, 2]
    assert logs == [["before", "after"]] * 3


async def test_a_future_done_before_the_task_runs_resumes_the_coroutine() -> None:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[int] = loop.create_future()
    coro = _slow(fut, [])
    _, waiting = start(coro)
    fut.set_result(4)
    assert await loop.create_task(_await(Resume(coro, waiting))) == 5


async def test_a_coroutine_yielding_to_the_loop_resumes() -> None:
    async def yields() -> str:
        await asyncio.sleep(0)
        return "after a turn"

    coro = yields()
    finished, waiting = start(coro)
    assert not finished and waiting is None
    assert await Resume(coro, waiting) == "after a turn"


async def _await(r: Resume, started: asyncio.Event | None = None) -> object:
    """Await `r` in a task; `started` is set in the very step that starts waiting, so a
    test that saw it set knows the task is suspended in `r` (a barrier, not a pause)."""
    if started is not None:
        started.set()
    return await r
