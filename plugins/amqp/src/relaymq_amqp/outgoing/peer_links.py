"""Links the peer attaches on an outgoing connection, served by the broker's
``relaymq.amqp_link_handlers`` (as on a connection a client opened).

A broker connection is an AMQP connection like any other: the peer may attach
links over it too. An Artemis federation target that applies remote policies
does (it opens its address and queue receivers back over the connection the
source opened). `PeerLinks` is what `link_handlers.IncomingLink` needs of a
connection, for an outgoing one; `connection.AmqpConnection.serve_peer_links`
turns it on. A link no handler claims is refused.
"""

from __future__ import annotations

import logging
from typing import Any

from relaymq_amqp import engine as pn
from relaymq_amqp import link_handlers

log = logging.getLogger("relaymq.amqp.outgoing")


class PeerLinks:
    """The peer-attached links of one outgoing connection (across reconnections)."""

    def __init__(self, outgoing: Any, broker: Any) -> None:
        self.outgoing = outgoing
        self.broker = broker
        self.kconn: Any = None  # handlers open their own kernel connections
        self.closed = False
        #: proton link -> `link_handlers.IncomingLink`
        self.extension_links: dict[Any, Any] = {}

    @property
    def engine(self) -> Any:
        return self.outgoing._engine

    def want_flush(self) -> None:
        self.outgoing._flush()

    def extension_closed(self, extension: Any) -> None:
        if pn.link_remote_closed(extension.pn) and \
                self.extension_links.pop(extension.pn, None) is not None:
            pn.link_free(extension.pn)

    # -- events from the connection ----------------------------------------------------
    def opened(self, link: Any, caps: tuple[list[str], list[str]] | None) -> None:
        known = self.extension_links.get(link)
        if known is not None:
            known._on_remote_open(caps)
            return
        extension = link_handlers.dispatch(self, link, caps)
        if extension is None:
            offered, desired = caps if caps is not None else ([], [])
            extension = link_handlers.IncomingLink(self, link, offered, desired)
            log.info("AMQP connection %s: the peer attached link %s, which nothing here serves; "
                     "refused", self.outgoing.name, extension.name)
            self.extension_links[link] = extension
            extension.refuse("amqp:not-allowed",
                             "this broker connection serves no such link (only federation links)")
            return
        self.extension_links[link] = extension

    def remote_closed(self, link: Any, closed: bool) -> bool:
        extension = self.extension_links.pop(link, None)
        if extension is None:
            return False
        extension._on_detach(closed)
        pn.link_free(link)
        return True

    def flow(self, link: Any) -> bool:
        extension = self.extension_links.get(link)
        if extension is None:
            return False
        extension._on_flow()
        return True

    def delivery(self, link: Any, delivery: Any) -> bool:
        extension = self.extension_links.get(link)
        if extension is None:
            return False
        extension._on_delivery(delivery)
        return True

    def session_lost(self, session: Any) -> None:
        """The peer ended `session`: the links it attached on it are gone."""
        for link, extension in list(self.extension_links.items()):
            if pn.link_session(link) == session:
                del self.extension_links[link]
                try:
                    extension._on_detach(False)
                except Exception:  # noqa: BLE001
                    log.exception("AMQP link %s: handler failed on detach", extension.name)

    def lost(self) -> None:
        """The connection is gone: every peer link with it."""
        extensions = list(self.extension_links.values())
        self.extension_links.clear()
        for extension in extensions:
            try:
                extension._on_detach(False)
            except Exception:  # noqa: BLE001
                log.exception("AMQP link %s: handler failed on detach", extension.name)
