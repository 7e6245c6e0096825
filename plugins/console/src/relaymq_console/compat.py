"""ActiveMQ's monitoring endpoints for scripts that already scrape them.

* `/admin/xml/queues.jsp`: ActiveMQ's XML list of queues and their stats;
* `/api/jolokia/read/<mbean>/<attribute>`: Jolokia-style reads of the common
  broker and destination attributes (QueueSize, ConsumerCount, EnqueueCount,
  DequeueCount, ExpiredCount, InFlightCount, MemoryPercentUsage,
  StorePercentUsage, ...), answered in Jolokia's JSON shape.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote
from xml.sax.saxutils import escape, quoteattr

from relaymq.errors import DestinationError
from relaymq.model.destination import Destination

DESTINATION_ATTRIBUTES = {
    "QueueSize": "depth", "ConsumerCount": "consumers", "ProducerCount": "producers",
    "EnqueueCount": "enqueued", "DequeueCount": "dequeued", "DispatchCount": "dispatched",
    "ExpiredCount": "expired", "InFlightCount": "in_flight",
    "MemoryUsageByteCount": "memory_used", "Name": "name",
}


#: which destinations the user may see (None: all)
Visible = Callable[[Destination], bool] | None


async def queues_xml(broker: Any, visible: Visible = None) -> str:
    """From the queues' live counters (cheap for 10,000 queues); names are escaped
    in attributes and in the feed links alike. Only the queues `visible` lets through."""
    rows = []
    for dest, queue in list(broker.management.queues.items()):
        if visible is not None and not visible(dest):
            continue
        s = queue.stats
        link = escape(quote(dest.name, safe=""))
        rows.append(
            f"<queue name={quoteattr(dest.name)}>\n"
            f"<stats size=\"{s.pending}\" consumerCount=\"{s.consumers}\" "
            f"enqueueCount=\"{s.enqueued}\" dequeueCount=\"{s.dequeued}\"/>\n"
            f"<feed><atom>queueBrowse/{link}?view=rss&amp;feedType=atom_1.0</atom>"
            f"<rss>queueBrowse/{link}?view=rss&amp;feedType=rss_2.0</rss></feed>\n"
            f"</queue>")
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<queues>\n" + "\n".join(rows) + "\n</queues>\n"


#: ActiveMQ's JMX domain (`<managementContext jmxDomainName=...>` changes it)
DOMAIN = "org.apache.activemq"


def _mbean(text: str, expected: str = DOMAIN) -> dict[str, str]:
    domain, _, props = text.partition(":")
    if domain != expected:
        raise KeyError(f"unknown MBean domain {domain!r} (only {expected})")
    out = {}
    for part in props.split(","):
        k, sep, v = part.partition("=")
        if not sep:
            raise KeyError(f"malformed MBean name {text!r}")
        out[k.strip()] = v.strip()
    return out


async def jolokia_read(broker: Any, mbean: str, attribute: str,
                       domain: str = DOMAIN, visible: Visible = None) -> dict[str, Any]:
    """Jolokia's response for one attribute read (status 404 for what does not exist,
    403 for a destination `visible` does not let the user see)."""
    request = {"mbean": mbean, "attribute": attribute, "type": "read"}
    now = int(time.time())
    try:
        props = _mbean(mbean, domain)
        value = await _value(broker, props, attribute, visible)
    except PermissionError as exc:
        return {"request": request, "status": 403, "error_type": "java.lang.SecurityException",
                "error": str(exc), "timestamp": now}
    except (KeyError, DestinationError) as exc:
        return {"request": request, "status": 404, "error_type": "javax.management."
                "InstanceNotFoundException", "error": str(exc).strip("'\""), "timestamp": now}
    return {"request": request, "value": value, "timestamp": now, "status": 200}


async def _value(broker: Any, props: dict[str, str], attribute: str, visible: Visible) -> Any:
    m = broker.management
    if props.get("type") != "Broker" or props.get("brokerName") not in (broker.name, None):
        raise KeyError(f"no broker {props.get('brokerName')!r} (this is {broker.name!r})")
    kind = props.get("destinationType")
    if kind is None:
        usage = broker.usage
        limit = usage.memory.limit or 0
        store_limit = m.store_limit()
        values = {
            "BrokerName": broker.name, "TotalConnectionsCount": len(m.connections()),
            "MemoryPercentUsage": int(100 * usage.memory.used / limit) if limit else 0,
            "StorePercentUsage": int(100 * m.store_size() / store_limit) if store_limit else 0,
            "TotalMessageCount": sum(q.depth for q in await m.destinations("queue")),
        }
        if attribute not in values:
            raise KeyError(f"no attribute {attribute!r} on the broker; known: {', '.join(values)}")
        return values[attribute]
    name = props.get("destinationName", "")
    dest = Destination.queue(name) if kind == "Queue" else Destination.topic(name)
    if visible is not None and not visible(dest):
        raise PermissionError(f"the broker's authorization map grants read on {dest} to none "
                              "of the user's groups")
    info = await m.destination(dest)
    if attribute == "MemoryPercentUsage":
        limit = broker.usage.memory.limit or 0
        return int(100 * info.memory_used / limit) if limit else 0
    field_name = DESTINATION_ATTRIBUTES.get(attribute)
    if field_name is None:
        raise KeyError(f"no attribute {attribute!r}; known: {', '.join(DESTINATION_ATTRIBUTES)}")
    return getattr(info, field_name)
