"""Dead-letter strategies: where a message goes when it cannot be delivered.

`sharedDeadLetterStrategy` (one queue, `ActiveMQ.DLQ` by default),
`individualDeadLetterStrategy` (a queue or topic per destination, named with
`queuePrefix`/`topicPrefix` and suffixes) and `discarding` (drop, but count it).
Non-persistent messages are dead-lettered only with `processNonPersistent`, and
expired ones only with `processExpired` (ActiveMQ's defaults: false, true).
"""

from __future__ import annotations

from typing import Final

from relaymq.config.model import DeadLetterStrategyConfig
from relaymq.model.destination import Destination
from relaymq.model.message import Message

ORIGINAL_DESTINATION: Final = "original_destination"
ORIGINAL_EXPIRATION: Final = "original_expiration"
DLQ_DELIVERY_FAILURE_CAUSE: Final = "dlq_delivery_failure_cause"
#: the durable subscription (``durable://CLIENT:NAME``) a dead-lettered topic message
#: came from: a retry sends it back to that subscription only, not the whole topic
ORIGINAL_SUBSCRIPTION: Final = "original_subscription"


def dead_letter_destination(
    strategy: DeadLetterStrategyConfig, message: Message, origin: Destination, expired: bool
) -> Destination | None:
    """The DLQ for `message` from `origin`, or None when it is to be dropped."""
    if strategy.kind == "discarding":
        return None
    if not message.durable and not strategy.process_non_persistent:
        return None
    if expired and not strategy.process_expired:
        return None
    if strategy.kind == "individual":
        if origin.is_queue:
            name = f"{strategy.queue_prefix}{origin.name}{strategy.queue_suffix}"
            return Destination.queue(name) if strategy.use_queue_for_queue_messages else Destination.topic(name)
        name = f"{strategy.topic_prefix}{origin.name}{strategy.topic_suffix}"
        return Destination.queue(name) if strategy.use_queue_for_topic_messages else Destination.topic(name)
    return Destination.queue(strategy.dead_letter_queue)


def dead_letter_copy(
    strategy: DeadLetterStrategyConfig, message: Message, origin: Destination,
    dlq: Destination, reason: str, subscription: str | None = None,
) -> Message:
    """The copy that goes to `dlq`: same body, headers and id; it records where it
    came from (the durable `subscription` too, for a topic's) and its original
    expiration, and lives `strategy.expiration` ms."""
    annotations = dict(message.annotations or {})
    annotations.setdefault(ORIGINAL_DESTINATION, origin.key)
    if subscription is not None:
        annotations[ORIGINAL_SUBSCRIPTION] = subscription
    annotations[ORIGINAL_EXPIRATION] = message.expiration
    annotations[DLQ_DELIVERY_FAILURE_CAUSE] = reason
    expiration = 0
    if strategy.expiration:
        from relaymq.model.message import now_millis

        expiration = now_millis() + strategy.expiration
    return message.copy(destination=dlq, expiration=expiration, annotations=annotations)
