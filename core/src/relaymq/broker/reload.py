"""Applying a re-read configuration to a running broker (``relaymq run`` on SIGHUP).

What can change safely changes at once, without dropping a connection:
destination policies (`<destinationPolicy>`: every lookup after the reload sees the
new entries, and existing destinations take their new entry for the settings read
per message: flow control, paging size, the dead-letter strategy) and whatever
plugins apply in `relaymq_config_reloaded` (relaymq-auth: users, groups and
permissions). Everything else (connectors, the store, the plugin list, broker
connections, usage limits) needs a restart; each such change is named in the log.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from relaymq.config.model import BrokerConfig

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker

log = logging.getLogger("relaymq.broker")

#: BrokerConfig fields whose change needs a restart, with the words the log uses.
RESTART_FIELDS = {
    "transport_connectors": "transport connectors",
    "persistence_adapter": "the persistence adapter",
    "persistent": "persistent",
    "plugins": "the <plugins> list",
    "destination_interceptors": "destination interceptors",
    "broker_connections": "broker connections",
    "system_usage": "system usage limits",
    "broker_name": "brokerName",
    "data_directory": "dataDirectory",
    "scheduler_support": "schedulerSupport",
    "logging": "logging",
}


#: fields whose elements' own settings plugins re-read on reload (relaymq-auth's users
#: and entries): only adding, removing or reordering elements needs a restart
BY_TAG = ("plugins", "destination_interceptors")


def needs_restart(old: BrokerConfig, new: BrokerConfig) -> list[str]:
    """What changed between `old` and `new` that a reload does not apply."""
    changed = []
    for name, words in RESTART_FIELDS.items():
        before, after = getattr(old, name), getattr(new, name)
        if name in BY_TAG:
            before, after = [e.tag for e in before], [e.tag for e in after]
        if before != after:
            changed.append(words)
    return changed


def apply_reload(broker: Broker, new: BrokerConfig) -> list[str]:
    """Apply `new`'s policies and plugin settings; returns what still needs a restart."""
    pending = needs_restart(broker.config, new)
    broker.policies.replace(new.policy_entries, new.default_policy)
    region = broker.region
    if region is not None:
        for queue in list(region.queues.values()):
            queue.policy = broker.policies.entry_for(queue.destination)
        for topic in list(region.topics.values()):
            topic.policy = broker.policies.entry_for(topic.destination)
    broker.plugins.pm.hook.relaymq_config_reloaded(broker=broker, config=new)
    for words in pending:
        log.warning("configuration reload: %s changed; that takes effect at the next restart",
                    words)
    return pending
