"""The interceptor chain: async send filters folded once into one callable.

A filter is ``async def f(ctx, message, next)`` (or a plain function returning
``next(ctx, message)``'s awaitable, which saves a coroutine on the hot path). It may change the message
(`message.copy(...)`), call ``await next(ctx, message)`` for other destinations
(virtual topics, composite destinations), or not call it at all (drop).
The chain is folded at start-up in configuration order; the last link is the
router. Nothing here goes through pluggy per message.

A filter that has nothing to do most of the time (topic subscriptions on queues
while no queue subscribes) can be left out of the chain while it is idle
(`Broker.set_filter_idle`): the broker folds the chain again and every
connection sees the new one through the `SendChain` they share, so an idle
filter costs no call per message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from relaymq.model.message import Message

if TYPE_CHECKING:
    from relaymq.dispatch.batch import SendContext

Next = Callable[["SendContext", Message], Awaitable[None]]
SendFilter = Callable[["SendContext", Message, Next], Awaitable[None]]


class SendChain:
    """The folded chain every connection sends through (`call`), replaced as a
    whole when a filter goes idle or comes back (`Broker.set_filter_idle`)."""

    def __init__(self, call: Next) -> None:
        self.call = call


def fold(filters: Sequence[SendFilter], terminal: Next) -> Next:
    """Compose `filters` (first = outermost) around `terminal`."""
    chain = terminal
    for f in reversed(filters):
        chain = _link(f, chain)
    return chain


def _link(f: SendFilter, nxt: Next) -> Next:
    # A plain function: the filter's own awaitable is returned, not wrapped in
    # another coroutine, so each link costs one call on the per-message path.
    def call(ctx: SendContext, message: Message) -> Awaitable[None]:
        return f(ctx, message, nxt)

    call.__qualname__ = f"chain<{getattr(f, '__qualname__', f)}>"
    return call
