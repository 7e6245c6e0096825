"""Copies, moves and DLQ retries as the console answers them: how many messages
landed, how many duplicate detection dropped (a moved or retried one stays where
it was), and for a retry, how many the authorization map kept in the dead-letter
queue and why. The API answers these dicts; a page shows `summary`."""

from __future__ import annotations

from typing import Any

from relaymq.model.destination import Destination
from starlette.requests import Request

from relaymq_console.access import Access, User


def _messages(n: int) -> str:
    return f"{n} message{'' if n == 1 else 's'}"


def _dropped(report: Any, at: str, left_in: str | None) -> str | None:
    """What duplicate detection dropped at `at` (`left_in`: where the originals stay)."""
    if not report.duplicates:
        return None
    stays = f", left in {left_in}" if left_in else ""
    return (f"{_messages(report.duplicates)} dropped by duplicate detection at {at} (its "
            f"_AMQ_DUPL_ID was sent there before){stays}")


async def copy(management: Any, dest: Destination, to: Destination,
               which: dict[str, Any]) -> dict[str, Any]:
    report = await management.copy_messages_report(dest, to, **which)
    return _answer({"copied": report.done, "duplicates": report.duplicates},
                   [_dropped(report, to.name, None)])


async def move(management: Any, dest: Destination, to: Destination,
               which: dict[str, Any]) -> dict[str, Any]:
    report = await management.move_messages_report(dest, to, **which)
    return _answer({"moved": report.done, "duplicates": report.duplicates},
                   [_dropped(report, to.name, dest.name)])


async def retry(access: Access, user: User, management: Any, dlq: Destination,
                request: Request, which: dict[str, Any]) -> dict[str, Any]:
    """Each message goes back only when the map lets `user` send to where it came
    from (`Access.send_refusal`, asked once per destination and audited); the
    others stay in `dlq`, counted and explained in `refusals`."""
    reasons: dict[str, str] = {}

    def may_send(back: Destination) -> bool:
        refused = access.send_refusal(user, "retry", back, request)
        if refused is not None:
            reasons[back.key] = refused
        return refused is None

    report = await management.retry_messages_report(dlq, may_send=may_send, **which)
    refusals = [{"destination": key, "messages": n, "reason": reasons[key]}
                for key, n in sorted(report.refused.items())]
    notes = [f"{_messages(r['messages'])} refused and left in {dlq.name}: {r['reason']}"
             for r in refusals]
    return _answer({"retried": report.done, "refused": sum(report.refused.values()),
                    "duplicates": report.duplicates, "refusals": refusals},
                   [*notes, _dropped(report, "its original destination", dlq.name)])


def _answer(out: dict[str, Any], notes: list[str | None]) -> dict[str, Any]:
    said = [n for n in notes if n]
    if said:
        out["note"] = "; ".join(said)
    return out


def summary(answer: dict[str, Any], to: str | None = None) -> str:
    """One line for a page: `copied 2 messages to q`, and what was not done."""
    verb = next(k for k in ("copied", "moved", "retried") if k in answer)
    line = f"{verb} {answer[verb]} messages" + (f" to {to}" if to else "")
    return f"{line}; {answer['note']}" if "note" in answer else line
