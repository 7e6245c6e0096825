"""Broker hooks of relaymq-queue-types (the `relaymq.hooks` entry point).

They make the plugin's service (`QueueTypes`, ``broker.extensions["queue-types"]``),
add its send filter (topic subscriptions on queues) and tell it when queues come
and go and when the configuration is reloaded. Nothing here runs per message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relaymq.hookspecs import hookimpl

from relaymq_queue_types.service import EXTENSION, QueueTypes

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.broker.chain import SendFilter
    from relaymq.config.model import BrokerConfig
    from relaymq.dispatch.consumer import Consumer
    from relaymq.model.destination import Destination


def service(broker: Broker) -> QueueTypes:
    svc = broker.extensions.get(EXTENSION)
    if not isinstance(svc, QueueTypes):
        svc = QueueTypes(broker)
        broker.extensions[EXTENSION] = svc
    return svc


@hookimpl
def relaymq_configure(broker: Broker, config: BrokerConfig) -> None:
    service(broker).configure(config)


@hookimpl
def relaymq_interceptors(broker: Broker) -> list[SendFilter] | None:
    svc = service(broker)
    svc.filter_changed()  # idle (out of the chain) until a queue subscribes to a topic
    return [svc.send_filter]


@hookimpl
def relaymq_destination_added(broker: Broker, destination: Destination, recovered: bool) -> None:
    if destination.is_queue:
        service(broker).queue_added(destination)


@hookimpl
def relaymq_destination_removed(broker: Broker, destination: Destination) -> None:
    if destination.is_queue:
        service(broker).queue_removed(destination)


@hookimpl
def relaymq_consumer_removed(broker: Broker, consumer: Consumer) -> None:
    service(broker).consumer_removed(consumer)


@hookimpl
def relaymq_config_reloaded(broker: Broker, config: BrokerConfig) -> None:
    service(broker).reloaded(config)
