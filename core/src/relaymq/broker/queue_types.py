"""Queue types: which class makes a queue, chosen by name.

A queue type is an entry point of the group `relaymq.queue_types`: a subclass of
`relaymq.dispatch.queue.Queue` (or any callable with its constructor's signature
that returns one). The standard queue is the type named ``standard``. A queue's
type comes from, in order: a declaration (`<queue physicalName=".." queueType=".."/>`,
`broker.management.create_queue(name, queue_type=..)`), the `<policyEntry
queueType="..">` matching it, then ``standard``. The contract is documented in
docs/plugin-author-guide.md ("Queue types").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from relaymq.config.model import BrokerConfig, Origin
from relaymq.errors import ConfigError

QUEUE_TYPES = "relaymq.queue_types"

#: what a queue type's entry point is: ``factory(region, destination, key, policy)``
#: returning a `relaymq.dispatch.queue.Queue` (the region checks that)
QueueFactory = Callable[..., Any]


def resolve_queue_type(registry: Any, name: str, origin: Origin | None = None) -> QueueFactory:
    """The factory of queue type `name`.

    :raises PluginNotFound: no installed distribution provides it; the message
        names the installed queue types.
    :raises ConfigError: the entry point is not callable.
    """
    factory = registry.resolve(QUEUE_TYPES, name, origin)
    if not callable(factory):
        raise ConfigError(f"queue type '{name}' ({factory!r}) is not a Queue subclass or factory")
    return factory  # type: ignore[no-any-return]


def configured_queue_types(registry: Any, config: BrokerConfig) -> dict[str, QueueFactory]:
    """Every queue type `config` names, resolved (so a typo fails at start-up)."""
    out: dict[str, QueueFactory] = {}
    for name, origin in config.queue_type_uses():
        if name not in out:
            out[name] = resolve_queue_type(registry, name, origin)
    return out
