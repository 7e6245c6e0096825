"""Receivers the broker attaches itself on a connection a peer opened.

A peer that sends Artemis' remote federation policies over its control link
expects this broker to open federation receivers back over that same
connection (the peer serves them: it is the side with the messages).
`attach_receiver` opens one on the session of a link the peer attached and
resolves once the peer answers; the broker-side connection keeps it among its
``extension_links`` and hands it the link's events, as it does for an
`link_handlers.IncomingLink`:

```python
link = await attach_receiver(incoming.conn, incoming.pn, "name", source, target,
                             credit=1000, properties={...}, desired_capabilities=[...],
                             on_message=handle)   # handle(msg): msg.data, msg.accept() ...
await link.close()
```

A refusal (the peer answers with a null source, then closes) raises
`LinkRefused` with the peer's error condition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Condition, Terminus
from relaymq_amqp.types import Symbol

log = logging.getLogger("relaymq.amqp")


class LinkRefused(Exception):
    """The peer refused (or closed) a link before it was attached."""

    def __init__(self, message: str, condition: Condition | None = None) -> None:
        super().__init__(message)
        self.condition = condition


class InitiatedMessage:
    """One received message: its bytes, and the outcome to send back (nothing
    is sent once the link or connection is gone: the peer sends it again)."""

    __slots__ = ("data", "_link", "_delivery", "settled")

    def __init__(self, data: bytes, link: InitiatedReceiver, delivery: Any, settled: bool) -> None:
        self.data = data
        self._link = link
        self._delivery = delivery
        self.settled = settled

    def _settle(self, state: int, condition: Condition | None = None, failed: bool = False,
                undeliverable: bool = False) -> None:
        if self.settled:
            return
        self.settled = True
        link = self._link
        if link.closed or link.conn.engine is None:
            return
        pn.settle_with(self._delivery, state, condition, failed, undeliverable)
        link._settled_one()

    def accept(self) -> None:
        self._settle(pn.ACCEPTED)

    def release(self) -> None:
        self._settle(pn.RELEASED)

    def reject(self, condition: Condition | None = None) -> None:
        self._settle(pn.REJECTED, condition)

    def modify(self, failed: bool = True, undeliverable: bool = False) -> None:
        self._settle(pn.MODIFIED, None, failed, undeliverable)


class InitiatedReceiver:
    """A receiver this broker attached on an incoming connection; credit is
    topped up to `window` as messages are settled."""

    def __init__(self, conn: Any, session: Any, name: str, source: Terminus, target: Terminus,
                 credit: int, on_message: Callable[[InitiatedMessage], Any]) -> None:
        self.conn = conn
        self.name = name
        self.window = credit
        self.on_message = on_message
        self.pn = pn.receiver(session, name)
        pn.set_source(self.pn, source)
        pn.set_target(self.pn, target)
        self.attached: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closed = False
        self.handler: Any = None
        self.remote_properties: dict[str, Any] = {}
        self.remote_offered_capabilities: list[str] = []
        self.remote_source: Terminus | None = None
        self._outstanding = 0
        self._parts: list[bytes] = []

    def _open(self, properties: dict[str, Any] | None, desired_capabilities: list[str] | None) -> None:
        if properties:
            pn.link_set_properties(self.pn, {Symbol(k): v for k, v in properties.items()})
        if desired_capabilities:
            self.conn.engine.attach_patches[self.name] = (None, list(desired_capabilities))
        self.conn.extension_links[self.pn] = self
        pn.link_open(self.pn)
        if self.window:
            pn.link_flow(self.pn, self.window)
        self.conn.want_flush()

    # -- events from the connection ---------------------------------------------------
    def _on_remote_open(self, caps: tuple[list[str], list[str]] | None) -> None:
        if caps is not None:
            self.remote_offered_capabilities = list(caps[0])
        props = pn.link_remote_properties(self.pn)
        self.remote_properties = {str(k): v for k, v in props.items()} if isinstance(props, dict) else {}
        self.remote_source = pn.remote_source(self.pn)
        if self.remote_source.kind == 0:
            return  # refused: the close with the reason follows
        if not self.attached.done():
            self.attached.set_result(None)

    def _on_delivery(self, d: Any) -> None:
        engine = self.conn.engine
        if engine is None or self.closed:
            return
        data = pn.take_transfer(engine, self.pn, d, self._parts)
        if data is None:
            return
        settled = bool(pn.delivery_settled(d))
        pn.link_advance(self.pn)
        msg = InitiatedMessage(data, self, d, settled)
        self._outstanding += 1
        try:
            self.on_message(msg)
        except Exception:  # noqa: BLE001 - a failing handler must not kill the connection
            log.exception("on_message of receiver %s failed; releasing the message", self.name)
            msg.release()
        if settled:
            self._settled_one()

    def _settled_one(self) -> None:
        self._outstanding -= 1
        if self.closed:
            return
        credit = pn.link_credit(self.pn)
        if self.window and credit + self._outstanding <= self.window // 2:
            pn.link_flow(self.pn, self.window - credit - self._outstanding)
        self.conn.want_flush()

    def _on_flow(self) -> None:
        pass

    def _on_detach(self, closed: bool) -> None:
        """The peer detached or closed the link, or the connection is gone."""
        was_closed = self.closed
        self.closed = True
        cond = pn.link_remote_condition(self.pn) if self.conn.engine is not None else None
        if not self.attached.done():
            self.attached.set_exception(LinkRefused(
                f"link {self.name} refused by the peer: {cond or 'no reason given'}", cond))
        elif not was_closed:
            log.info("link %s closed by the peer: %s", self.name, cond or "no reason given")
        if self.conn.engine is not None and not pn.link_local_closed(self.pn):
            if closed:
                pn.link_close(self.pn)
            else:
                pn.link_detach(self.pn)

    # -- ours -------------------------------------------------------------------------
    def stop(self) -> None:
        """Grant no more credit and drain what is granted; `resume` undoes it."""
        self.window = 0
        if self.conn.engine is not None and not self.closed:
            pn.link_drain(self.pn, 0)
            self.conn.want_flush()

    def resume(self, credit: int) -> None:
        """Top the credit up to `credit` again after `stop`."""
        self.window = credit
        if self.conn.engine is not None and not self.closed:
            pn.link_set_drain(self.pn, False)
            missing = credit - pn.link_credit(self.pn) - self._outstanding
            if missing > 0:
                pn.link_flow(self.pn, missing)
            self.conn.want_flush()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.conn.engine is not None and not pn.link_local_closed(self.pn):
            pn.link_close(self.pn)
            self.conn.extension_closed(self)
            self.conn.want_flush()


async def attach_receiver(conn: Any, beside: Any, name: str, source: Terminus, target: Terminus, *,
                          on_message: Callable[[InitiatedMessage], Any], credit: int = 100,
                          properties: dict[str, Any] | None = None,
                          desired_capabilities: list[str] | None = None,
                          timeout: float = 30.0) -> InitiatedReceiver:
    """Attach a receiver on `conn` (a broker-side `connection.AmqpConnection`),
    on the session of the proton link `beside`; returns once the peer answered."""
    if conn.engine is None or conn.closed:
        raise LinkRefused(f"link {name}: the connection is closed")
    link = InitiatedReceiver(conn, pn.link_session(beside), name, source, target, credit, on_message)
    link._open(properties, desired_capabilities)
    try:
        await asyncio.wait_for(asyncio.shield(link.attached), timeout)
    except BaseException:
        await link.close()
        raise
    return link
