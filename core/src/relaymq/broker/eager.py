"""Starting a coroutine by hand, the way Python 3.12's eager tasks do.

A transport's per-message work (``ClientConnection.submit``) usually finishes
without ever waiting. Running it with ``coro.send(None)`` right where the bytes
were parsed costs no task and no loop turn; only the rare send that does wait
(flow control, a new destination, a store write in a transaction) continues in
a task, through `Resume`, in order before anything queued behind it.

A future's ``_asyncio_future_blocking`` flag says "a task is about to wait on
me": the awaiting coroutine sets it and the task clears it in the same step.
Between `start` and the task's first step (a loop turn later) nothing may see
it set: a second coroutine awaiting the same future (the store removal that
all acks of one loop turn share) would find it set and fail with
``RuntimeError: await wasn't used with future``. So `start` clears it, as a
task's step does, and `Resume` sets it again just before handing the future to
its task.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any, Final

#: `start`'s first result when the coroutine finished: the second is its value
FINISHED: Final = True


def start(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Run `coro` until it first waits. Returns ``(True, value)`` when it
    finished, else ``(False, waiting)``: pass ``Resume(coro, waiting)`` to a task.
    Exceptions of the coroutine propagate."""
    try:
        waiting = coro.send(None)
    except StopIteration as done:
        return FINISHED, done.value
    if getattr(waiting, "_asyncio_future_blocking", False):
        waiting._asyncio_future_blocking = False  # as a task's step does; see the module doc
    return False, waiting


class Resume:
    """``await Resume(coro, waiting)`` finishes a coroutine that `start` left
    suspended on `waiting`, and returns its value.

    The awaiting task waits on the same future the coroutine yielded (its
    ``_asyncio_future_blocking`` flag set again first), resumes the coroutine
    when it is done, and forwards cancellation into it."""

    __slots__ = ("coro", "waiting")

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting: Any) -> None:
        self.coro = coro
        self.waiting = waiting

    def __await__(self) -> Generator[Any, None, Any]:
        coro, waiting = self.coro, self.waiting
        if getattr(waiting, "_asyncio_future_blocking", None) is False:
            waiting._asyncio_future_blocking = True  # the task takes it in this very step
        while True:
            try:
                yield waiting
            except BaseException as exc:  # noqa: BLE001 - cancellation goes into the coroutine
                try:
                    waiting = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    waiting = coro.send(None)
                except StopIteration as done:
                    return done.value
