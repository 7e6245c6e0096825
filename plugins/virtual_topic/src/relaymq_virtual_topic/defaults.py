"""The documented default: ``VirtualTopic.>`` topics are virtual out of the box.

RelayMQ's rule is "installed is not enabled", with documented defaults as the
one exception. ActiveMQ Classic makes topics named ``VirtualTopic.>`` virtual
(consumer queues ``Consumer.*.VirtualTopic.>``) whenever the broker configures
no ``<destinationInterceptors>`` at all; as soon as it configures any, only
what is configured applies. RelayMQ does exactly the same so that an
``activemq.xml`` behaves unchanged, provided relaymq-virtual-topic is installed:

* no ``<destinationInterceptors>`` children  -> the default is on;
* any ``<destinationInterceptors>`` child     -> only the configured ones;
  an empty ``<virtualDestinationInterceptor/>`` therefore turns the default off.

This module is registered through the ``relaymq.hooks`` entry point group
(always loaded when the distribution is installed) and contributes the
default's send filter through ``relaymq_interceptors``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from relaymq.hookspecs import hookimpl

from relaymq_virtual_topic.interceptor import VirtualDestinationInterceptor
from relaymq_virtual_topic.model import (
    DEFAULT_PREFIX,
    DEFAULT_TOPIC_NAME,
    InterceptorConfig,
    VirtualTopic,
)

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker
    from relaymq.broker.chain import SendFilter
    from relaymq.config.model import BrokerConfig

log = logging.getLogger("relaymq.virtual_topic")


def default_applies(config: BrokerConfig) -> bool:
    """True when `config` leaves the virtual topic default on (see module doc)."""
    if config.destination_interceptors:
        return False
    # ActiveMQ's <broker useVirtualTopics="false">; honoured once the config model has it.
    return bool(getattr(config, "use_virtual_topics", True))


def default_interceptor() -> VirtualDestinationInterceptor:
    """ActiveMQ's default: ``<virtualTopic name="VirtualTopic.>" prefix="Consumer.*."/>``."""
    config = InterceptorConfig(topics=[VirtualTopic(name=DEFAULT_TOPIC_NAME, prefix=DEFAULT_PREFIX)])
    return VirtualDestinationInterceptor(config, default=True)


@hookimpl
def relaymq_interceptors(broker: Broker) -> list[SendFilter] | None:
    """Return the default's filter when the configuration leaves it on."""
    if not default_applies(broker.config):
        return None
    interceptor = default_interceptor()
    interceptor.attach(broker)
    log.info("virtual topics: the documented default is on because no <destinationInterceptors> "
             "are configured (relaymq-virtual-topic is installed); an empty "
             "<virtualDestinationInterceptor/> turns it off")
    return [interceptor.filter]
