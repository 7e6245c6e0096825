"""RelayMQ virtual topics, composite and filtered destinations (virtualDestinationInterceptor).

Configured exactly as in ActiveMQ Classic, under ``<destinationInterceptors>``;
see docs/virtual-destinations.md. With no ``<destinationInterceptors>`` at all,
topics named ``VirtualTopic.>`` are virtual (the documented default).
"""

from relaymq import compiled as _compiled

_compiled.select(__name__, __path__[0])

from relaymq_virtual_topic.fanout import ORIGINAL_DESTINATION  # noqa: E402 (after select)
from relaymq_virtual_topic.interceptor import VirtualDestinationInterceptor  # noqa: E402
from relaymq_virtual_topic.mirrored import MirroredQueue  # noqa: E402
from relaymq_virtual_topic.model import (  # noqa: E402
    CompositeDestination,
    ForwardTarget,
    InterceptorConfig,
    VirtualTopic,
    parse_interceptor,
)
from relaymq_virtual_topic.selectors import SELECTOR_PROVIDER, SelectorProvider  # noqa: E402

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
