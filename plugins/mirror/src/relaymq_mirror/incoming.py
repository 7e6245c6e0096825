"""The target side's status: one entry per source broker that mirrors into this
one (Artemis' ``RemoteBrokerConnectionControl``, with the target's counts).

Each entry is registered with management (`incoming_broker_connections()`,
named by the source's node id, ``x-opt-amq-bkr-id``) when the source's first
mirror link attaches, and stays after its links are gone (``connected``
false), so a standby shows which source last fed it and when. The counts of a
link are read from the link while it is attached and folded into the entry
when it detaches: nothing is added to the per-event path.
"""

from __future__ import annotations

import time
from typing import Any, Final

from relaymq.failures import RepeatedFailures

_EXTENSION: Final = "mirror-incoming"
KIND: Final = "mirror"
#: the source's open properties (Artemis): its broker connection's name and node id
CONNECTION_INFO: Final = "broker-connection-info"


def _iso(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stamp)) + f".{int(stamp * 1000) % 1000:03d}Z"


class IncomingMirror:
    """What one source broker's mirror links did here."""

    kind = KIND

    def __init__(self, source_id: str) -> None:
        self.remote_node = source_id
        self.remote_address: str | None = None
        self.connection_name: str | None = None  # the source's <amqp-connection name>
        self.links: list[Any] = []  # attached `MirrorTarget`s
        self.attaches = 0
        self.applied = 0  # of links gone
        self.rejected = 0
        self.duplicates = 0
        self.last_event: float | None = None
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.since: float = time.time()  # when `connected` last changed
        #: why storing this source's events failed since they were last stored here
        #: (each reason logged once while the failure repeats)
        self.store_failures = RepeatedFailures()

    @property
    def connected(self) -> bool:
        return bool(self.links)

    def attached(self, target: Any) -> None:
        link = target.link
        self.links.append(target)
        self.attaches += 1
        self.remote_address = getattr(target.kconn, "remote_address", None) or self.remote_address
        info = link.remote_connection_properties.get(CONNECTION_INFO)
        if isinstance(info, dict):
            name = info.get("connectionName")
            if isinstance(name, str):
                self.connection_name = name
        if len(self.links) == 1:
            self.since = time.time()

    def detached(self, target: Any) -> None:
        if target not in self.links:
            return
        self.links.remove(target)
        self.applied += target.applied
        self.rejected += target.rejected
        self.duplicates += target.duplicates()
        self._last_of(target)
        if target.applied and not target.failed_to_store:
            self.store_failures.succeeded()  # its events were stored: any failure is over
        if not self.links:
            self.since = time.time()

    def refused(self, error: str) -> None:
        """An attach of this source was refused here, one of its events was rejected,
        or storing its events failed (`error` says why)."""
        self.last_error = error
        self.last_error_at = time.time()

    def store_failed(self, target: Any, error: str) -> bool:
        """Storing the events of `target`, a link of this source, failed (`error`):
        whether that is news to log, rather than the same failure again (the source
        sends the events again on a new link every retry-interval): a reason not
        seen since this source's events were last stored here."""
        if target.applied:
            self.store_failures.succeeded()  # the link stored events first: it had recovered
        return self.store_failures.failed(error)

    def _last_of(self, target: Any) -> None:
        if target.last_event is not None and (self.last_event is None
                                              or target.last_event > self.last_event):
            self.last_event = target.last_event

    def status(self) -> dict[str, Any]:
        accepted, rejected, duplicates = self.applied, self.rejected, self.duplicates
        not_found = pending = 0
        for target in self.links:
            accepted += target.applied
            rejected += target.rejected
            duplicates += target.duplicates()
            self._last_of(target)
        retries = self.links[0].retries if self.links else None
        if retries is not None:
            not_found = retries.not_found.get(self.remote_node, 0)
            pending = len(retries.of(self.remote_node))
        return {"source": self.remote_node, "connection_name": self.connection_name,
                "remote_address": self.remote_address, "connected": self.connected,
                "links": len(self.links), "attaches": self.attaches,
                "applied": accepted - duplicates, "duplicates": duplicates,
                "rejected": rejected, "acks_pending": pending, "acks_not_found": not_found,
                "last_event": _iso(self.last_event), "last_error": self.last_error,
                "last_error_at": _iso(self.last_error_at), "since": _iso(self.since)}


def incoming_mirror(broker: Any, source_id: str) -> IncomingMirror:
    """The entry of `source_id`, made and registered with management on first use."""
    entries = broker.extensions.get(_EXTENSION)
    if not isinstance(entries, dict):
        entries = broker.extensions[_EXTENSION] = {}
    entry = entries.get(source_id)
    if entry is None:
        entry = entries[source_id] = IncomingMirror(source_id)
        broker.management.register_incoming_broker_connection(source_id, entry)
    return entry  # type: ignore[no-any-return]
