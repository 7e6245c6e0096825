"""Starting a coroutine by hand, the way Python 3.12's eager tasks do.

A transport's per-message work (``ClientConnection.submit``) usually finishes
without ever waiting. Running it with ``coro.send(None)`` right where the bytes
were parsed costs no task and no loop turn; only the rare send that does wait
(flow control, a new destination, a store write in a transaction) continues in
a task, through `Resume`, in order before anything queued behind it.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any

#: `start`'s first result when the coroutine finished: the second is its value
FINISHED = True


def start(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Run `coro` until it first waits. Returns ``(True, value)`` when it
    finished, else ``(False, waiting)``: pass ``Resume(coro, waiting)`` to a task.
    Exceptions of the coroutine propagate."""
    try:
        waiting = coro.send(None)
    except StopIteration as done:
        return FINISHED, done.value
    return False, waiting


class Resume:
    """``await Resume(coro, waiting)`` finishes a coroutine that `start` left
    suspended on `waiting`, and returns its value.

    The awaiting task yields the same future the coroutine yielded (its
    ``_asyncio_future_blocking`` flag is still set), resumes the coroutine when
    it is done, and forwards cancellation into it."""

    __slots__ = ("coro", "waiting")

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting: Any) -> None:
        self.coro = coro
        self.waiting = waiting

    def __await__(self) -> Generator[Any, None, Any]:
        coro, waiting = self.coro, self.waiting
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
