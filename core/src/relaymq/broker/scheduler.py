"""Scheduled delivery (`AMQ_SCHEDULED_DELAY`, `_PERIOD`, `_REPEAT`) with `schedulerSupport`.

Scheduled messages wait in memory on the event loop's timer; each due copy is
sent as a fresh message with the scheduling headers cleared. (ActiveMQ keeps
them in a separate scheduler store; RelayMQ does not persist them yet, see
docs/messaging.md.)
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from relaymq.model.message import Message

if TYPE_CHECKING:
    from relaymq.broker.connection import ClientConnection

log = logging.getLogger("relaymq.scheduler")


class Scheduler:
    def __init__(self) -> None:
        self._handles: set[asyncio.TimerHandle] = set()
        self.pending = 0

    def schedule(self, message: Message, connection: ClientConnection) -> None:
        delay = max(message.scheduled_delay, 0) / 1000.0
        period = max(message.scheduled_period, 0) / 1000.0
        repeat = max(message.scheduled_repeat, 0) if period > 0 else 0
        self._arm(message, connection, delay, period, repeat)

    def _arm(self, message: Message, conn: ClientConnection, delay: float, period: float,
             remaining: int) -> None:
        loop = asyncio.get_running_loop()
        self.pending += 1
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._handles.discard(handle)
            self.pending -= 1
            copy = message.copy(message_id=None if remaining or period else message.message_id,
                                timestamp=0)
            copy.scheduled_delay = copy.scheduled_period = copy.scheduled_repeat = 0
            if copy.message_id is None:
                copy.message_id = conn.new_message_id()
            loop.create_task(self._send(conn, copy))
            if remaining > 0:
                self._arm(message, conn, period, period, remaining - 1)

        handle = loop.call_later(delay, fire)
        self._handles.add(handle)

    async def _send(self, conn: ClientConnection, message: Message) -> None:
        try:
            if conn.closed:
                conn = conn.broker.internal_connection()
            await conn.send(message)
        except Exception:  # noqa: BLE001 - a failed scheduled send is logged, not raised
            log.exception("sending scheduled message %s failed", message.message_id)

    def stop(self) -> None:
        for h in self._handles:
            h.cancel()
        self._handles.clear()
        self.pending = 0
