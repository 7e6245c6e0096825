"""Incoming AMQP links that belong to another plugin (mirror, federation).

Broker-to-broker links are told apart by the capabilities their attach
desires: Artemis' mirror desires ``amq.mirror``, its federation links
``AMQ_FEDERATION_CONTROL_LINK``, ``AMQ_FEDERATION_EVENT_LINK``, ... A plugin
that serves such links registers a handler class in the entry-point group
``relaymq.amqp_link_handlers`` under the capability's symbol::

    [project.entry-points."relaymq.amqp_link_handlers"]
    "amq.mirror" = "relaymq_mirror.target:MirrorTarget"

When a peer attaches a link (either direction) whose desired capabilities
name a registered handler, the AMQP connection builds ``Handler(link)`` with
an `IncomingLink` and calls ``handler.attach()``; the handler answers with
`IncomingLink.open` or `IncomingLink.refuse`. A handler class may also claim
addresses with ``address_prefixes`` (the target address of a link the peer
sends on, the source address of one it receives from): such a link comes to
the handler even without the capability, so it can refuse it with a clear
error (Artemis refuses a ``$ACTIVEMQ_ARTEMIS_MIRROR...`` link that does not
desire ``amq.mirror``). Transaction coordinators are matched first, as in
Artemis; every other link is an ordinary producer or consumer link, and its
per-message path never comes here.

Afterwards the connection calls ``handler.on_delivery(delivery)``,
``handler.on_flow()`` and, once, ``handler.on_detach(closed)`` (the peer
detached or closed the link, or the connection went away). Handlers run on
the broker's loop and must not block.

`register` adds a handler without an entry point (embedding, tests).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Final, Protocol

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Condition, Terminus
from relaymq_amqp.types import Symbol

log = logging.getLogger("relaymq.amqp")

GROUP: Final = "relaymq.amqp_link_handlers"
_EXTENSION: Final = "amqp-link-handlers"


class LinkHandler(Protocol):
    """What a ``relaymq.amqp_link_handlers`` entry point is (a class)."""

    #: addresses that come to this handler even when the link does not desire its capability
    address_prefixes: ClassVar[tuple[str, ...]]

    def __init__(self, link: IncomingLink) -> None: ...

    def attach(self) -> None:
        """Answer the attach: `link.open(...)` or `link.refuse(...)`."""

    def on_delivery(self, delivery: Any) -> None: ...

    def on_flow(self) -> None: ...

    def on_detach(self, closed: bool) -> None:
        """The peer detached (`closed` False) or closed the link, or the connection is gone."""


class IncomingLink:
    """One link a peer attached to the broker, handed to a `LinkHandler`: what
    the peer asked for, and the calls to answer, receive, send and settle.

    `conn` is the broker-side `relaymq_amqp.connection.AmqpConnection`;
    `kconn` its authenticated kernel connection (`relaymq.broker.connection.ClientConnection`).
    """

    def __init__(self, conn: Any, link: Any, offered: list[str], desired: list[str]) -> None:
        self.conn = conn
        self.broker = conn.broker
        self.kconn = conn.kconn
        self.pn = link
        self.name = pn.link_name(link)
        #: True when the peer sends on this link (we are the receiver)
        self.peer_sends = not pn.link_is_sender(link)
        self.remote_source: Terminus = pn.remote_source(link)
        self.remote_target: Terminus = pn.remote_target(link)
        props = pn.link_remote_properties(link)
        self.remote_properties: dict[str, Any] = (
            {str(k): v for k, v in props.items()} if isinstance(props, dict) else {})
        self.offered_capabilities = offered
        self.desired_capabilities = desired
        self.remote_snd_settle_mode = pn.link_remote_snd_settle_mode(link)
        self.remote_rcv_settle_mode = pn.link_remote_rcv_settle_mode(link)
        engine = conn.engine
        #: the peer's container id (an Artemis broker's node id)
        self.remote_container: str | None = engine.remote_container if engine is not None else None
        cprops = engine.remote_properties if engine is not None else None
        self.remote_connection_properties: dict[str, Any] = (
            {str(k): v for k, v in cprops.items()} if isinstance(cprops, dict) else {})
        self.handler: Any = None
        self.closed = False
        self._parts: list[bytes] = []

    @property
    def address(self) -> str | None:
        """The address the link is about: the target's when the peer sends, else the source's."""
        return self.remote_target.address if self.peer_sends else self.remote_source.address

    # -- answering the attach -----------------------------------------------------
    def open(self, *, source: Terminus | None = None, target: Terminus | None = None,
             properties: dict[str, Any] | None = None, offered_capabilities: list[str] | None = None,
             desired_capabilities: list[str] | None = None, snd_settle_mode: int | None = None,
             rcv_settle_mode: int | None = None, credit: int = 0) -> None:
        """Accept the attach. Source and target default to the peer's; `properties`
        keys become symbols; `credit` (when the peer sends) is granted at once."""
        link = self.pn
        pn.set_source(link, source if source is not None else self.remote_source)
        pn.set_target(link, target if target is not None else self.remote_target)
        if properties:
            pn.link_set_properties(link, {Symbol(k): v for k, v in properties.items()})
        if offered_capabilities or desired_capabilities:
            self.conn.engine.attach_patches[self.name] = (offered_capabilities, desired_capabilities)
        pn.link_open(link, snd_settle_mode, rcv_settle_mode)
        if credit and self.peer_sends:
            pn.link_flow(link, credit)
        self.flush()

    def refuse(self, condition: str, description: str) -> None:
        """Refuse the attach the AMQP way: a null terminus, then a close with the error."""
        link = self.pn
        if self.peer_sends:
            pn.set_target(link, None)
            pn.set_source(link, self.remote_source)
        else:
            pn.set_source(link, None)
            pn.set_target(link, self.remote_target)
        pn.link_open(link)
        self.close(condition, description)

    def close(self, condition: str | None = None, description: str | None = None) -> None:
        """Close our end (with an error condition, if given)."""
        if self.closed:
            return
        self.closed = True
        if self.conn.engine is not None and not pn.link_local_closed(self.pn):
            pn.link_close(self.pn, Condition(condition, description) if condition else None)
        self.conn.extension_closed(self)
        self.flush()

    # -- flow ------------------------------------------------------------------------
    @property
    def credit(self) -> int:
        return int(pn.link_credit(self.pn)) if not self.closed else 0

    def flow(self, credit: int) -> None:
        """Grant the peer `credit` more messages."""
        if not self.closed:
            pn.link_flow(self.pn, credit)
            self.flush()

    def flush(self) -> None:
        """Write what is waiting (this loop turn)."""
        self.conn.want_flush()

    # -- receiving (the peer sends) ---------------------------------------------------------
    def receive(self, delivery: Any) -> bytes | None:
        """The bytes of a complete delivery (and advance past it), or None while
        it is still partial or was aborted."""
        engine = self.conn.engine
        n = pn.delivery_pending(delivery)
        if pn.delivery_partial(delivery):
            if n:
                self._parts.append(engine.recv(self.pn, n))
            return None
        if pn.delivery_aborted(delivery):
            self._parts.clear()
            pn.link_advance(self.pn)
            pn.delivery_settle(delivery)
            return None
        data = engine.recv(self.pn, n) if n else b""
        if self._parts:
            self._parts.append(data)
            data = b"".join(self._parts)
            self._parts.clear()
        pn.link_advance(self.pn)
        return data

    def accept(self, delivery: Any) -> None:
        self.settle(delivery, pn.ACCEPTED)

    def release(self, delivery: Any) -> None:
        self.settle(delivery, pn.RELEASED)

    def reject(self, delivery: Any, condition: str, description: str) -> None:
        self.settle(delivery, pn.REJECTED, Condition(condition, description))

    def modify(self, delivery: Any, failed: bool = True, undeliverable: bool = False) -> None:
        if not self.closed and self.conn.engine is not None:
            pn.settle_with(delivery, pn.MODIFIED, None, failed, undeliverable)
            self.flush()

    def settle(self, delivery: Any, state: int, condition: Condition | None = None) -> None:
        """Set our outcome and settle (nothing when the link or connection is gone:
        the peer sends it again)."""
        if not self.closed and self.conn.engine is not None:
            pn.settle_with(delivery, state, condition)
            self.flush()

    # -- events from the connection ----------------------------------------------------
    def _on_remote_open(self, caps: Any) -> None:
        """Nothing: the peer's attach was the open (`initiated` links wait for it)."""

    def _on_delivery(self, delivery: Any) -> None:
        if self.handler is not None and not self.closed:
            self.handler.on_delivery(delivery)

    def _on_flow(self) -> None:
        if self.handler is not None and not self.closed:
            self.handler.on_flow()

    def _on_detach(self, closed: bool) -> None:
        """The peer detached or closed the link, or the connection is gone."""
        was_closed = self.closed
        self.closed = True
        if self.conn.engine is not None and not pn.link_local_closed(self.pn):
            if closed:
                pn.link_close(self.pn)
            else:
                pn.link_detach(self.pn)
        if self.handler is not None and not was_closed:
            try:
                self.handler.on_detach(closed)
            except Exception:  # noqa: BLE001
                log.exception("AMQP link %s: handler failed on detach", self.name)

    # -- sending (the peer receives) ----------------------------------------------------------
    def send(self, data: bytes, tag: int) -> Any:
        """Send one encoded message; returns its delivery (its remote state comes
        to `on_delivery`)."""
        d = self.conn.engine.send(self.pn, tag, data)
        self.flush()
        return d


def _load(broker: Any) -> dict[str, Any]:
    """capability -> handler class, from the entry points (once per broker)."""
    handlers: dict[str, Any] = {}
    plugins = getattr(broker, "plugins", None)
    if plugins is None:
        return handlers
    try:
        names = plugins.names(GROUP)
    except Exception:  # noqa: BLE001 - an unknown group on an older kernel
        return handlers
    for name in names:
        try:
            handlers[name] = plugins.resolve(GROUP, name)
        except Exception:  # noqa: BLE001 - one broken plugin must not stop the others
            log.exception("AMQP link handler %r could not be loaded", name)
    return handlers


class LinkHandlers:
    """The handlers of one broker, by capability and by address prefix."""

    __slots__ = ("by_capability", "prefixes")

    def __init__(self, by_capability: dict[str, Any]) -> None:
        self.by_capability = by_capability
        self.prefixes: list[tuple[str, Any]] = []
        for cls in by_capability.values():
            for prefix in getattr(cls, "address_prefixes", ()) or ():
                self.prefixes.append((prefix, cls))

    def __bool__(self) -> bool:
        return bool(self.by_capability)

    def find(self, desired: list[str], address: str | None) -> Any:
        for cap in desired:
            cls = self.by_capability.get(cap)
            if cls is not None:
                return cls
        if address:
            for prefix, cls in self.prefixes:
                if address.startswith(prefix):
                    return cls
        return None


def handlers_of(broker: Any) -> LinkHandlers:
    """The broker's link handlers (loaded at the first link attach)."""
    ext = broker.extensions
    found = ext.get(_EXTENSION)
    if not isinstance(found, LinkHandlers):
        found = LinkHandlers(_load(broker))
        ext[_EXTENSION] = found
    return found


def register(broker: Any, capability: str, handler: Any) -> None:
    """Add (or replace) the handler of `capability` on `broker`."""
    current = handlers_of(broker)
    by_capability = dict(current.by_capability)
    by_capability[capability] = handler
    broker.extensions[_EXTENSION] = LinkHandlers(by_capability)


def dispatch(conn: Any, link: Any, capabilities: tuple[list[str], list[str]] | None) -> Any:
    """Hand the link to its handler; returns the handler, or None for an ordinary link.
    A handler that fails while attaching gets the link refused with the error."""
    handlers = handlers_of(conn.broker)
    if not handlers:
        return None
    offered, desired = capabilities if capabilities is not None else ([], [])
    address: str | None = None
    if handlers.prefixes:
        term = pn.remote_source(link) if pn.link_is_sender(link) else pn.remote_target(link)
        address = term.address
    cls = handlers.find(desired, address)
    if cls is None:
        return None
    incoming = IncomingLink(conn, link, offered, desired)
    try:
        handler = cls(incoming)
        incoming.handler = handler
        handler.attach()
    except Exception as exc:  # noqa: BLE001 - refuse this link, keep the connection
        log.exception("AMQP link %s: handler %s failed to attach", incoming.name, cls)
        if not incoming.closed:
            incoming.refuse("amqp:internal-error", f"{type(exc).__name__}: {exc}")
        return incoming
    return incoming
