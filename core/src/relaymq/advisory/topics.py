"""ActiveMQ's advisory topic names and message property names (AdvisorySupport)."""

from __future__ import annotations

from relaymq.model.destination import Destination, DestinationKind

PREFIX = "ActiveMQ.Advisory."
CONNECTION = PREFIX + "Connection"
QUEUE = PREFIX + "Queue"
TOPIC = PREFIX + "Topic"
TEMP_QUEUE = PREFIX + "TempQueue"
TEMP_TOPIC = PREFIX + "TempTopic"

#: the JMSType of every advisory message
ADVISORY_TYPE = "Advisory"

# property names, spelled as ActiveMQ spells them (including "orignal")
ORIGIN_BROKER_ID = "originBrokerId"
ORIGIN_BROKER_NAME = "originBrokerName"
ORIGIN_BROKER_URL = "originBrokerURL"
CONSUMER_COUNT = "consumerCount"
PRODUCER_COUNT = "producerCount"
CONSUMER_ID = "consumerId"
PRODUCER_ID = "producerId"
MESSAGE_ID = "orignalMessageId"
DESTINATION = "orignalDestination"
DLQ_FAILURE_CAUSE = "dlqDeliveryFailureCause"


def is_advisory(dest: Destination) -> bool:
    return dest.is_topic and dest.name.startswith(PREFIX)


def _kind_word(dest: Destination) -> str:
    return "Queue" if dest.is_queue else "Topic"


def consumer_topic(dest: Destination) -> Destination:
    """`ActiveMQ.Advisory.Consumer.Queue.NAME` / `.Consumer.Topic.NAME`."""
    return Destination.topic(f"{PREFIX}Consumer.{_kind_word(dest)}.{_escaped(dest)}")


def producer_topic(dest: Destination) -> Destination:
    return Destination.topic(f"{PREFIX}Producer.{_kind_word(dest)}.{_escaped(dest)}")


def expired_topic(dest: Destination) -> Destination:
    return Destination.topic(f"{PREFIX}Expired.{_kind_word(dest)}.{dest.name}")


def dlq_topic(dest: Destination) -> Destination:
    return Destination.topic(f"{PREFIX}MessageDLQd.{_kind_word(dest)}.{dest.name}")


def destination_topic(dest: Destination) -> Destination:
    """Where creating or deleting `dest` is advised: `.Queue`, `.Topic`, `.TempQueue`, `.TempTopic`."""
    name = {
        DestinationKind.QUEUE: QUEUE, DestinationKind.TOPIC: TOPIC,
        DestinationKind.TEMP_QUEUE: TEMP_QUEUE, DestinationKind.TEMP_TOPIC: TEMP_TOPIC,
    }[dest.kind]
    return Destination.topic(name)


def _escaped(dest: Destination) -> str:
    # ActiveMQ writes a comma (composite names) as &sbquo; so the topic stays one name
    return dest.name.replace(",", "&sbquo;")
