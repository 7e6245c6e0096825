"""The `solace` queue type: access type, dead message queue, max redelivery, respect TTL.

Solace's queue settings map to `<policyEntry>` attributes (docs/queue-types.md):

* ``accessType="exclusive"``: one consumer receives at a time, the first bound;
  the others stand by and the next takes over when it leaves (its
  unacknowledged messages go back, marked redelivered). A consumer that binds
  later never takes over from a bound active one, whatever its priority
  (`activemq.priority`) or ActiveMQ's exclusive option (`activemq.exclusive`):
  they only order the standbys (those with the exclusive option first, then the
  highest priority, then bind order). ``non-exclusive`` (the default) is
  competing consumers, where `activemq.exclusive` works as on a standard queue.
* ``deadMessageQueue="NAME"``: where messages go that expire or exceed
  ``maxRedelivery``; only messages their publisher marked eligible
  (``JMS_Solace_DeadMsgQueueEligible=true``, or every message with
  ``dmqEligible="true"`` on the queue) go there, the rest are discarded and
  counted (`discarded`, and `dead_lettered` as the kernel's discarding strategy
  counts them). As in Solace the DMQ must exist (declared in
  `<destinations>` or created by a client or management); while it does not,
  eligible messages are discarded and counted too. ActiveMQ's
  `deadLetterStrategy` and `deadMessageQueue` never both apply to one queue: the
  configuration refuses an entry that sets both.
* ``maxRedelivery="N"``: after N redeliveries the next failure dead-letters. A
  delivery whose consumer leaves without settling it (disconnect, unsubscribe,
  link detach) is a failure too, as in ActiveMQ and Solace, and so is one
  acknowledged in a transaction that is rolled back (Solace counts every
  redelivery, ActiveMQ's redelivery policy counts rollbacks).
* ``respectTtl="false"``: the queue ignores message expiry (Solace's default is
  false; RelayMQ keeps ActiveMQ's behaviour, true, unless told).
"""

from __future__ import annotations

import logging
from typing import Any

from relaymq.config.model import DeadLetterStrategyConfig
from relaymq.dispatch.consumer import CONSUMER_LEFT, Consumer, NackMode
from relaymq.dispatch.entry import QueueEntry
from relaymq.dispatch.queue import Queue
from relaymq.errors import DestinationError
from relaymq.model.destination import Destination
from relaymq.model.message import Message

log = logging.getLogger("relaymq.queue_types")

#: the message property a publisher marks a message DMQ-eligible with (Solace's JMS name)
DMQ_ELIGIBLE = "JMS_Solace_DeadMsgQueueEligible"
_TRUE = (True, "true", "True", "TRUE", 1, "1")
_DISCARDING = DeadLetterStrategyConfig(kind="discarding")


class SolaceQueue(Queue):
    """A standard queue with Solace's per-queue settings."""

    #: why this type refuses browsers and selectors (None: it accepts them)
    refuses: str | None = None
    refuses_browsing = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        policy = self.policy
        self.exclusive_access = policy.access_type == "exclusive"
        self.custom_choice = self.exclusive_access
        #: the consumer an exclusive queue delivers to until it leaves
        self.active: Consumer | None = None
        #: the broker's management API, bound by the plugin's hooks when the queue is
        #: made (`relaymq_destination_added`); asked whether the DMQ exists
        self.management: Any = None
        self.dmq: Destination | None = None
        #: True while the broker itself unbinds consumers (a partition count change):
        #: what they held goes back without counting as failed deliveries
        self.unbinding = False
        if policy.dead_message_queue:
            if policy.dead_letter_strategy is not None:
                raise DestinationError(
                    f"<policyEntry queue=\"{policy.queue}\">{_at(policy)} sets both "
                    "deadMessageQueue and a deadLetterStrategy; one of them applies to a queue")
            self.dmq = Destination.queue(policy.dead_message_queue)
            self._dmq_strategy = DeadLetterStrategyConfig(
                kind="shared", dead_letter_queue=policy.dead_message_queue,
                process_non_persistent=True, process_expired=True)

    @property
    def discarded(self) -> int:
        """Messages that left for no dead message queue (management's
        `DestinationInfo.discarded`)."""
        return self.stats.discarded

    # -- access type -------------------------------------------------------------
    def dispatch_consumers(self) -> list[Consumer]:
        """An exclusive queue dispatches to its active consumer alone, so only its
        room bounds a dispatch (not a standby's)."""
        if not self.exclusive_access:
            return super().dispatch_consumers()
        active = self.active
        if active is None:
            active = self.active = self._next_active()
            if active is None:
                return []
        return [active]

    def _next_active(self) -> Consumer | None:
        """The standby that takes over: one that asked for ActiveMQ's exclusive option
        (`activemq.exclusive`) first, then by priority (`activemq.priority`), then in
        bind order (the kernel keeps consumers sorted by priority, stable). A paused
        queue's consumers keep their turns: the next is chosen among them too, so one
        that binds during the pause stands by behind them."""
        bound = self.bound_consumers()
        return next((c for c in bound if c.exclusive), bound[0] if bound else None)

    def select_consumer(self, entry: QueueEntry, consumers: list[Consumer]) -> Consumer | None:
        if self.exclusive_access:
            active = self.active  # what `dispatch_consumers` gave
            return active if active is not None and active.capacity() > 0 else None
        return super().select_consumer(entry, consumers)

    def active_consumers(self) -> list[Consumer]:
        """Consumers that receive now (Solace's "active flow indication"): none while
        the queue is paused."""
        if self.exclusive_access:
            if self.paused:
                return []
            active = self.active
            if active is not None and active in self.consumers:
                return [active]
            nxt = self._next_active()  # the standby that takes over next
            return [nxt] if nxt is not None else []
        return super().active_consumers()

    def add_consumer(self, consumer: Consumer) -> None:
        if self.refuses is not None and ((consumer.browser and self.refuses_browsing)
                                         or (consumer.selector is not None and not consumer.browser)):
            what = "browsing" if consumer.browser else "a selector"
            raise DestinationError(f"{self.destination} is a {self.queue_type} queue: "
                                   f"{what} is not allowed on it ({self.refuses})")
        if self.exclusive_access and self.active is None and not consumer.browser:
            self.active = consumer  # the first bound
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        leaving = consumer is self.active
        if leaving:
            self.active = None  # the next standby takes over with what it held
        super().remove_consumer(consumer)  # returns what it held (`return_unacked`)
        if leaving and self.active is None:
            # chosen now even when nothing waits, so a consumer that binds later
            # does not take the standbys' turn
            self.active = self._next_active()

    def return_unacked(self, entries: list[QueueEntry], cause: str = CONSUMER_LEFT) -> None:
        """Deliveries that ended without an acknowledgement: a consumer left holding
        them (ActiveMQ counts a redelivery when a consumer closes with unacknowledged
        messages, Solace when a flow unbinds) or the transaction that acknowledged
        them was rolled back (Solace counts every redelivery). Each is a failed
        delivery: the ones that used up `maxRedelivery` dead-letter now, the rest go
        back, marked redelivered. Consumers the broker unbinds itself (`unbinding`)
        did not fail: what they held goes back without counting."""
        if self.unbinding:
            self.requeue(entries, unbound=True)  # redelivered, but not a failure
            return
        limit = self.policy.max_redelivery
        if limit is None or limit < 0:
            super().return_unacked(entries, cause)  # the broker's redelivery policy
            return
        back = []
        for entry in entries:
            if entry.failures < limit:
                back.append(entry)
                continue
            self._out_of_flight(entry)
            entry.delivery_count += 1
            self.dead_letter(entry, f"max redelivery ({limit}) exceeded: {cause}")
        self.requeue(back)  # and dispatches into the room made

    # -- redelivery and the dead message queue ---------------------------------------
    def settle_negative(self, entry: QueueEntry, mode: str) -> None:
        limit = self.policy.max_redelivery
        if limit is None or limit < 0 or mode not in (NackMode.FAILED, NackMode.POISON):
            super().settle_negative(entry, mode)
            return
        # Solace counts every failed delivery against the queue's maxRedelivery
        self._out_of_flight(entry)
        entry.delivery_count += 1
        if entry.failures > limit:
            self.dead_letter(entry, f"max redelivery ({limit}) exceeded")
            self.dispatch()  # the consumer has room again: the next message goes
            return
        self.pending.put_back(entry)
        self.dispatch()

    def dead_letter(self, entry: QueueEntry, reason: str, expired: bool = False) -> None:
        if self.dmq is None:
            super().dead_letter(entry, reason, expired)
            return
        eligible = (entry.message.properties.get(DMQ_ELIGIBLE) in _TRUE
                    if DMQ_ELIGIBLE in entry.message.properties else self.policy.dmq_eligible)
        management = self.management
        strategy = self._dmq_strategy
        if not eligible or management is None or management.queue(self.dmq) is None:
            # discarded as the kernel's discarding strategy does it: counted in
            # `dead_lettered` too, reported removed as expired or killed
            self.stats.discarded += 1
            log.debug("%s: discarded %s (%s; %s)", self.destination, entry.message.message_id,
                      reason, "not DMQ-eligible" if not eligible else f"{self.dmq} does not exist")
            strategy = _DISCARDING
        # the dead message queue (or discarding) is this queue's dead-letter strategy
        # while the kernel moves the message (the region reads this queue's policy entry)
        self.policy.dead_letter_strategy = strategy
        try:
            super().dead_letter(entry, reason, expired)
        finally:
            self.policy.dead_letter_strategy = None


class IgnoresTtl(Queue):
    """`respectTtl="false"`: messages do not expire on this queue. A mixin chosen
    when the queue is made (`with_ttl_choice`), so queues that respect TTL do not
    pay for an override of `prepare` on every message."""

    def prepare(self, message: Message, batch: Any) -> None:
        if message.expiration:
            message = message.copy(expiration=0)  # this queue keeps it regardless
        super().prepare(message, batch)


_IGNORING: dict[type, type] = {}


def with_ttl_choice(cls: type[Queue], *args: Any) -> Queue:
    """Make a `cls` queue, or its variant that ignores message expiry when the
    policy (`args[3]`) says `respectTtl="false"` (read when the queue is made: a
    reload that changes it applies at the next restart)."""
    if args[3].respect_ttl:
        return cls(*args)
    variant = _IGNORING.get(cls)
    if variant is None:
        variant = _IGNORING[cls] = type(f"{cls.__name__}IgnoringTtl", (IgnoresTtl, cls), {})
    return variant(*args)  # type: ignore[no-any-return]


def solace_queue(*args: Any) -> Queue:
    """The `solace` entry point."""
    return with_ttl_choice(SolaceQueue, *args)


def _at(policy: Any) -> str:
    origin = getattr(policy, "origin", None)
    return f" at {origin}" if origin is not None and origin.line else ""
