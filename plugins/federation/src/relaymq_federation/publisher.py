"""Routing received messages into the local broker, in arrival order, and
settling each with the peer only once the local broker has it (stored, for a
durable message on a persistent store): end-to-end settlement, so a crash of
either side loses nothing (the peer redelivers what was not accepted)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from relaymq.broker.security import Principal
from relaymq.model.message import Message

from relaymq_federation.kernel import FEDERATION, network_connection

log = logging.getLogger("relaymq.federation")

Done = Callable[[BaseException | None], Any]


class LocalPublisher:
    """One network kernel connection and one ordered send loop."""

    def __init__(self, broker: Any, label: str, origin: str | None,
                 principal: Principal = FEDERATION) -> None:
        self.broker = broker
        #: whose rights the messages are routed with (`kernel`)
        self.principal = principal
        self.label = label
        self.origin = origin
        self._kconn: Any = None
        self._backlog: deque[tuple[Message, Done]] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.sent = 0

    async def connection(self) -> Any:
        if self._kconn is None or self._kconn.closed:
            self._kconn = network_connection(self.broker, self.principal, self.label,
                                             self.origin, transport="federation")
        return self._kconn

    def reset(self) -> None:
        """Use a new kernel connection (with the current `origin`) from the next message."""
        old, self._kconn = self._kconn, None
        if old is not None and not old.closed:
            asyncio.get_running_loop().create_task(old.close())

    def publish(self, message: Message, done: Done) -> None:
        self._backlog.append((message, done))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.label} publish")
        self._wake.set()

    async def _run(self) -> None:
        while True:
            if not self._backlog:
                self._wake.clear()
                await self._wake.wait()
                continue
            message, done = self._backlog.popleft()
            try:
                kconn = await self.connection()
                stored = await kconn.submit(message)
            except Exception as exc:  # noqa: BLE001 - refused locally: tell the peer
                log.warning("%s: a message for %s was refused locally: %s", self.label,
                            message.destination, exc)
                done(exc)
                continue
            if stored is None:
                self.sent += 1
                done(None)
            else:
                asyncio.ensure_future(stored).add_done_callback(
                    lambda f, d=done: self._stored(f, d))

    def _stored(self, fut: asyncio.Future[Any], done: Done) -> None:
        exc: BaseException | None = asyncio.CancelledError() if fut.cancelled() else fut.exception()
        if exc is None:
            self.sent += 1
        done(exc)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._task = None
        for _, done in self._backlog:
            done(ConnectionError("federation stopped"))
        self._backlog.clear()
        if self._kconn is not None and not self._kconn.closed:
            await self._kconn.close()
        self._kconn = None
