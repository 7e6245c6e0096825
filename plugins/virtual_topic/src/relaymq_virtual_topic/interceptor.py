"""``<virtualDestinationInterceptor>``: one send filter for virtual destinations.

For each message the filter, in this order:

1. splits a client-side composite destination (``A,topic://B``) so every part is
   treated as if sent on its own;
2. forwards a message sent to a composite queue/topic name to its ``forwardTo``
   targets (through this same routine, so a composite may forward to a virtual
   topic or another composite) and keeps it on the composite name only with
   ``forwardOnly="false"`` (or ``sendWhenNotMatched`` when nothing took it);
3. fans a message sent to a virtual topic out to the topic's consumer queues;
4. passes the message on to the rest of the chain (and so to the topic itself).

Forwarded copies continue down the chain after this filter, so filters
configured later (e.g. mirror capture) see each copy; filters configured
earlier saw the original send.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Final

from relaymq.config.report import Report
from relaymq.errors import DestinationError
from relaymq.model.destination import Destination
from relaymq.model.message import Message, SelectorView

from relaymq_virtual_topic.fanout import ConsumerQueueIndex, Fanout, forwarded_copy
from relaymq_virtual_topic.model import (
    CompositeDestination,
    InterceptorConfig,
    VirtualTopic,
    parse_interceptor,
)

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.broker.chain import Next
    from relaymq.config.model import PluginElement
    from relaymq.dispatch.batch import SendContext

log = logging.getLogger("relaymq.virtual_topic")

#: Advisory topics are never virtual (as in ActiveMQ), even under name=">".
ADVISORY: Final = "ActiveMQ.Advisory."
#: Forwarding deeper than this is a loop through wildcard composites.
MAX_FORWARD_DEPTH: Final = 16
_LOOKUP_LIMIT: Final = 10_000


class VirtualDestinationInterceptor:
    """The destination interceptor entry point ``virtualDestinationInterceptor``."""

    def __init__(self, config: InterceptorConfig, *, default: bool = False) -> None:
        self.config = config
        #: True when this is the documented default, not a configured element
        self.default = default
        self.fanout: Fanout | None = None
        #: destination -> what applies to it (None: nothing); filled as sends arrive
        self._plans: dict[Destination, _Plan | None] = {}

    @classmethod
    def from_element(cls, element: PluginElement, broker: Broker) -> VirtualDestinationInterceptor:
        return cls(parse_interceptor(element, strict=bool(getattr(broker, "strict", False))))

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        """`relaymq config check` (and `run`, before it starts anything): the warnings."""
        report = Report(strict=strict, quiet=True)  # returned: the caller reports them
        parse_interceptor(element, strict=strict, report=report)
        return report.warnings

    # -- assembly ------------------------------------------------------------------
    def install(self, broker: Broker) -> None:
        """Add the send filter; with nothing configured, add nothing at all.

        An empty ``<virtualDestinationInterceptor/>`` is how a configuration
        turns the documented ``VirtualTopic.>`` default off (as in ActiveMQ).
        """
        if self.config.empty:
            log.info("<virtualDestinationInterceptor>%s configures no virtual destinations; "
                     "the VirtualTopic.> default is off", _at(self.config))
            return
        self.attach(broker)
        broker.add_filter(self.filter)

    def attach(self, broker: Broker) -> None:
        """Connect to the broker without adding the filter (the default's filter is
        returned by the ``relaymq_interceptors`` hook instead)."""
        index = ConsumerQueueIndex(broker)
        broker.plugins.register(index, description="<virtualDestinationInterceptor> queue index")
        self.fanout = Fanout(broker, index)
        for line in self.describe():
            log.info("virtual destinations%s: %s",
                     " (documented default)" if self.default else "", line)

    def describe(self) -> list[str]:
        """One line per configured virtual destination (logs, CLI, console)."""
        return ([vt.describe() for vt in self.config.topics]
                + [c.describe() for c in self.config.composites])

    # -- the send filter -------------------------------------------------------------
    def filter(self, ctx: SendContext, message: Message, next: Next) -> Awaitable[None]:
        dest = message.destination
        # One dict lookup for the common case: a destination nothing here applies to.
        # A plain function returning the next link's awaitable adds no coroutine.
        if dest is None or self._plans.get(dest, _UNKNOWN) is None:
            return next(ctx, message)
        return self._route(ctx, message, next, 0)

    async def _route(self, ctx: SendContext, message: Message, next: Next, depth: int) -> None:
        dest = message.destination
        assert dest is not None
        plan = self._plans.get(dest, _UNKNOWN)
        if plan is _UNKNOWN:
            plan = self._plan(dest)
        if plan is None:
            await next(ctx, message)
            return
        if dest.is_composite:
            for part in dest.composite_parts():
                await self._route(ctx, message.copy(destination=part), next, depth)
            return
        composites, topics = plan
        if composites:
            if depth >= MAX_FORWARD_DEPTH:
                raise DestinationError(
                    f"{dest}: forwarded through {depth} composite destinations; the "
                    "<virtualDestinationInterceptor> composites form a loop")
            keep = False
            for comp in composites:
                taken = await self._forward(ctx, message, comp, next, depth)
                keep = keep or not comp.forward_only or (comp.send_when_not_matched and not taken)
            if not keep:
                return
        if topics:
            assert self.fanout is not None, "install() was not called"
            await self.fanout.publish(ctx, message, topics, next)
        await next(ctx, message)

    async def _forward(self, ctx: SendContext, message: Message, comp: CompositeDestination,
                       next: Next, depth: int) -> int:
        """Send copies to `comp`'s matching targets; returns how many matched."""
        copies = []
        for target in comp.forward_to:
            copy = forwarded_copy(message, target.destination, True)
            if target.selector is None or target.selector.matches(SelectorView(copy)):
                copies.append(copy)
        if comp.concurrent_send and len(copies) > 1:
            results = await asyncio.gather(
                *(self._route(ctx, c, next, depth + 1) for c in copies), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        else:
            for copy in copies:
                await self._route(ctx, copy, next, depth + 1)
        return len(copies)

    # -- what applies to a destination (cached) ----------------------------------------------
    def _plan(self, dest: Destination) -> _Plan | None:
        """(composites, virtual topics) covering `dest`; None when nothing applies."""
        plan: _Plan | None
        if dest.is_composite:
            plan = ((), ())  # split, then each part is planned on its own
        elif dest.is_wildcard:
            plan = None
        else:
            composites = tuple(c for c in self.config.composites if c.covers(dest))
            topics: tuple[VirtualTopic, ...] = ()
            if dest.is_topic and not dest.is_temporary and not dest.name.startswith(ADVISORY):
                topics = tuple(vt for vt in self.config.topics if vt.covers(dest))
            plan = (composites, topics) if composites or topics else None
        if len(self._plans) >= _LOOKUP_LIMIT:
            self._plans.clear()
        self._plans[dest] = plan
        return plan


_UNKNOWN: Any = object()
_Plan = tuple[tuple[CompositeDestination, ...], tuple[VirtualTopic, ...]]


def _at(config: InterceptorConfig) -> str:
    o = config.origin
    return f" at {o}" if o.line else ""
