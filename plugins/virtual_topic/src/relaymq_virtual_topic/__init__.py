"""RelayMQ virtual topics, composite and filtered destinations (virtualDestinationInterceptor).

Configured exactly as in ActiveMQ Classic, under ``<destinationInterceptors>``;
see docs/virtual-destinations.md. With no ``<destinationInterceptors>`` at all,
topics named ``VirtualTopic.>`` are virtual (the documented default).
"""

from relaymq_virtual_topic.fanout import ORIGINAL_DESTINATION
from relaymq_virtual_topic.interceptor import VirtualDestinationInterceptor
from relaymq_virtual_topic.mirrored import MirroredQueue
from relaymq_virtual_topic.model import (
    CompositeDestination,
    ForwardTarget,
    InterceptorConfig,
    VirtualTopic,
    parse_interceptor,
)
from relaymq_virtual_topic.selectors import SELECTOR_PROVIDER, SelectorProvider

__all__ = [
    "ORIGINAL_DESTINATION",
    "SELECTOR_PROVIDER",
    "CompositeDestination",
    "ForwardTarget",
    "InterceptorConfig",
    "MirroredQueue",
    "SelectorProvider",
    "VirtualDestinationInterceptor",
    "VirtualTopic",
    "parse_interceptor",
]
