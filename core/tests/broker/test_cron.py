"""`AMQ_SCHEDULED_CRON` entries: parsing, the next matching minute, and scheduling."""

from __future__ import annotations

from datetime import datetime

import pytest
from relaymq.broker.cron import Cron
from relaymq.client import connect_broker
from relaymq.config.model import BrokerConfig
from relaymq.errors import MessageFormatError
from relaymq.testing import running_broker


def ms(*args: int) -> int:
    return int(datetime(*args).timestamp() * 1000)  # local time, as the broker reads cron


@pytest.mark.parametrize(("entry", "after", "want"), [
    ("* * * * *", (2026, 3, 4, 10, 15, 30), (2026, 3, 4, 10, 16)),
    ("*/15 * * * *", (2026, 3, 4, 10, 16), (2026, 3, 4, 10, 30)),
    ("0 12 * * *", (2026, 3, 4, 12, 0), (2026, 3, 5, 12, 0)),
    ("30 2 1 * *", (2026, 3, 4, 10, 0), (2026, 4, 1, 2, 30)),
    ("0 0 * * 0", (2026, 3, 4, 10, 0), (2026, 3, 8, 0, 0)),  # 2026-03-08 is a Sunday
    ("0 0 * * 7", (2026, 3, 4, 10, 0), (2026, 3, 8, 0, 0)),  # 7 is Sunday too
    ("0 9 13 * 5", (2026, 3, 4, 10, 0), (2026, 3, 6, 9, 0)),  # day 13 OR a Friday
    ("10-50/20 8,20 * 12 *", (2026, 3, 4, 10, 0), (2026, 12, 1, 8, 10)),
    ("0 0 29 2 *", (2026, 3, 1, 0, 0), (2028, 2, 29, 0, 0)),  # the next leap day
])
def test_next_matching_minute(entry: str, after: tuple[int, ...], want: tuple[int, ...]) -> None:
    assert Cron(entry).next_after(ms(*after)) == ms(*want)


@pytest.mark.parametrize(("entry", "why"), [
    ("* * * *", "needs 5 fields"),
    ("60 * * * *", "outside 0-59"),
    ("* * * 13 *", "bad month field"),
    ("*/0 * * * *", "step must be positive"),
    ("a * * * *", "bad minute field"),
    ("0 0 30 2 *", "never matches"),
])
def test_bad_entries_are_clear_errors(entry: str, why: str) -> None:
    with pytest.raises(MessageFormatError, match=why):
        Cron(entry).next_after(ms(2026, 1, 1, 0, 0))


async def test_a_cron_message_waits_for_its_minute_and_a_bad_one_is_refused() -> None:
    async with running_broker(BrokerConfig(persistent=False, scheduler_support=True)) as b:
        c = await connect_broker(b)
        await c.send("queue://CRON", "every minute", properties={"AMQ_SCHEDULED_CRON": "* * * * *"})
        assert b.scheduler is not None and b.scheduler.pending == 1
        assert b.queue_size("CRON") == 0
        with pytest.raises(MessageFormatError, match="bad hour field"):
            await c.send("queue://CRON", "bad", properties={"AMQ_SCHEDULED_CRON": "0 25 * * *"})
        assert b.scheduler.pending == 1
        await c.close()
