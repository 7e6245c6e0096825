"""Cron entries for `AMQ_SCHEDULED_CRON`, as ActiveMQ's scheduler reads them.

Five fields, in the broker's local time: minute (0-59), hour (0-23), day of
month (1-31), month (1-12), day of week (0-7; 0 and 7 are Sunday). Each field is
`*`, a number, a range `a-b`, a list `a,b,c`, or any of those with a step
`/n` (`*/15`, `10-50/10`, `5/20`). When both day fields are restricted a day
matches if either does (as in cron).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from relaymq.errors import MessageFormatError

_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES = ("minute", "hour", "day of month", "month", "day of week")
#: no entry is looked for further ahead than this (Feb 30 never comes)
_HORIZON_DAYS = 5 * 366


class Cron:
    __slots__ = ("text", "minutes", "hours", "days", "months", "weekdays", "any_day",
                 "any_weekday")

    def __init__(self, text: str) -> None:
        self.text = text
        parts = text.split()
        if len(parts) != 5:
            raise MessageFormatError(
                f"AMQ_SCHEDULED_CRON {text!r:.80} needs 5 fields (minute hour day-of-month "
                f"month day-of-week), not {len(parts)}")
        sets = [_field(p, lo, hi, name, text)
                for p, (lo, hi), name in zip(parts, _RANGES, _NAMES, strict=True)]
        self.minutes, self.hours, self.days, self.months, weekdays = sets
        self.weekdays = frozenset(d % 7 for d in weekdays)
        self.any_day = parts[2] == "*"
        self.any_weekday = parts[4] == "*"

    def _day_matches(self, t: datetime) -> bool:
        dom = t.day in self.days
        dow = (t.isoweekday() % 7) in self.weekdays  # Sunday = 0
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def next_after(self, epoch_ms: int) -> int:
        """The first matching minute after `epoch_ms`, in epoch ms."""
        t = datetime.fromtimestamp(epoch_ms / 1000).replace(second=0, microsecond=0)
        t += timedelta(minutes=1)
        end = t + timedelta(days=_HORIZON_DAYS)
        while t < end:
            if t.month not in self.months:
                t = (t.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
            elif not self._day_matches(t):
                t = t.replace(hour=0, minute=0) + timedelta(days=1)
            elif t.hour not in self.hours:
                t = t.replace(minute=0) + timedelta(hours=1)
            elif t.minute not in self.minutes:
                t += timedelta(minutes=1)
            else:
                return int(t.timestamp() * 1000)
        raise MessageFormatError(f"AMQ_SCHEDULED_CRON {self.text!r:.80} never matches")


def _field(text: str, lo: int, hi: int, name: str, entry: str) -> frozenset[int]:
    out: set[int] = set()
    try:
        for part in text.split(","):
            step = 1
            if "/" in part:
                part, raw = part.split("/", 1)
                step = int(raw)
                if step <= 0:
                    raise ValueError("a step must be positive")
            if part == "*":
                a, b = lo, hi
            elif "-" in part:
                x, y = part.split("-", 1)
                a, b = int(x), int(y)
            else:
                a = int(part)
                b = hi if step > 1 else a
            if not lo <= a <= b <= hi:
                raise ValueError(f"{part} is outside {lo}-{hi}")
            out.update(range(a, b + 1, step))
    except ValueError as exc:
        raise MessageFormatError(
            f"AMQ_SCHEDULED_CRON {entry!r:.80}: bad {name} field {text!r}: {exc}") from None
    return frozenset(out)
