"""Links of an outgoing connection: `Sender` (settlement futures) and
`Receiver` (messages as bytes, settled by the caller)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Condition, DeliveryHandler, Terminus
from relaymq_amqp.outgoing.common import _STATES, ConnectionLost, LinkRefused, Outcome
from relaymq_amqp.types import Symbol

#: the owning `connection.AmqpConnection` (typed loosely: it imports this module)
AmqpConnection = Any

log = logging.getLogger("relaymq.amqp.outgoing")

#: who waits for a transfer's settlement: `send`'s future or `send_with`'s callback
_Waiter = asyncio.Future[Outcome] | Callable[[Outcome | BaseException], None]


class _Link(DeliveryHandler):
    """A link of an outgoing connection. `Engine.pump` hands its deliveries (a
    receiver's transfers, a sender's settlements) straight to `on_delivery`
    (the connection's `links`)."""

    def __init__(self, conn: AmqpConnection, name: str, source: Terminus, target: Terminus) -> None:
        self.conn = conn
        self.name = name
        self.source = source
        self.target = target
        self.pn: Any = None  # the proton link of the current connection
        self.attached: asyncio.Future[None] = conn.loop.create_future()
        self.closed = False
        self.remote_source: Terminus | None = None
        self.remote_target: Terminus | None = None
        #: what our attach carries besides the termini (link properties: symbol keys)
        self.properties: dict[str, Any] = {}
        self.desired_capabilities: list[str] = []
        self.offered_capabilities: list[str] = []
        #: what the peer's attach carried
        self.remote_properties: dict[str, Any] = {}
        self.remote_offered_capabilities: list[str] = []
        self.remote_desired_capabilities: list[str] = []
        #: called with the peer's condition (None: none given) when the peer closes
        #: the link after attaching it; a close is then the owner's to judge (a
        #: sequence-range link closes without one at the range's end), not logged
        self.on_remote_close: Callable[[Condition | None], None] | None = None
        #: the name of the session of its own it is attached on (None: the connection's)
        self.session_name: str | None = None

    def _attach(self, session: Any) -> None:
        raise NotImplementedError

    def on_delivery(self, delivery: Any) -> None:
        self._on_delivery(delivery)

    def _on_delivery(self, d: Any) -> None:
        """A transfer (receiver) or the peer's settlement (sender) of `d`."""

    def _set_properties(self) -> None:
        if self.properties:
            pn.link_set_properties(self.pn, {Symbol(k): v for k, v in self.properties.items()})

    def _opened(self) -> None:
        self.remote_source = pn.remote_source(self.pn)
        self.remote_target = pn.remote_target(self.pn)
        props = pn.link_remote_properties(self.pn)
        self.remote_properties = {str(k): v for k, v in props.items()} if isinstance(props, dict) else {}
        refused = (self.remote_target.kind == 0) if isinstance(self, Sender) else \
            (self.remote_source.kind == 0)
        if refused:
            return  # a close with the reason follows
        if not self.attached.done():
            self.attached.set_result(None)

    def _remote_closed(self) -> None:
        cond = pn.link_remote_condition(self.pn)
        err = LinkRefused(f"link {self.name} closed by the peer: {cond or 'no reason given'}", cond)
        opened = self.attached.done()
        if not opened:
            self.attached.set_exception(err)
        elif self.on_remote_close is None and not pn.link_local_closed(self.pn) \
                and not self.conn.closing:
            log.warning("%s", err)  # not the peer's answer to this side's own close
        self._lost(err)
        self.closed = True
        self.conn._links.pop(self.name, None)
        if not pn.link_local_closed(self.pn):
            pn.link_close(self.pn)
        if opened and self.on_remote_close is not None:
            self.on_remote_close(cond)

    def _lost(self, error: Exception) -> None:
        """The connection (or the link) went away."""

    async def close(self) -> None:
        """Close the link (a durable subscription behind it is removed)."""
        self._end(pn.link_close)

    async def detach(self) -> None:
        """Detach without closing: a durable subscription behind it stays."""
        self._end(pn.link_detach)

    def _end(self, how: Callable[[Any], None]) -> None:
        self.closed = True
        self.conn._links.pop(self.name, None)
        if self.pn is not None and self.conn._engine is not None and not pn.link_local_closed(self.pn):
            how(self.pn)
            self.conn._flush()


class Sender(_Link):
    """Sends encoded AMQP messages; `send` resolves with the peer's `Outcome`."""

    def __init__(self, conn: AmqpConnection, name: str, source: Terminus, target: Terminus,
                 presettled: bool) -> None:
        super().__init__(conn, name, source, target)
        self.presettled = presettled
        self.rcv_settle_first = False
        self._backlog: deque[tuple[bytes, _Waiter | None]] = deque()
        self._unsettled: dict[Any, _Waiter] = {}
        self._tag = 0

    def _attach(self, session: Any) -> None:
        self.pn = pn.sender(session, self.name)
        pn.set_source(self.pn, self.source)
        pn.set_target(self.pn, self.target)
        self._set_properties()
        pn.link_open(self.pn, snd_settle_mode=pn.SND_SETTLED if self.presettled else pn.SND_UNSETTLED,
                     rcv_settle_mode=pn.RCV_FIRST if self.rcv_settle_first else None)

    @property
    def credit(self) -> int:
        return pn.link_credit(self.pn) if self.pn is not None and self.conn._engine is not None else 0

    def send(self, data: bytes) -> asyncio.Future[Outcome]:
        """Queue `data` (one encoded message); the future resolves when the peer
        settles it (at once for a pre-settled sender)."""
        if self.closed:
            raise LinkRefused(f"sender {self.name} is closed")
        fut: asyncio.Future[Outcome] = self.conn.loop.create_future()
        self._backlog.append((data, fut))
        self._pump()
        return fut

    def send_with(self, data: bytes, on_settled: Callable[[Outcome | BaseException], None]) -> None:
        """`send` without a future: `on_settled` is called with the `Outcome` when
        the peer settles `data`, or with the exception when the link or connection
        is lost first (a sender that keeps many transfers in flight saves a future
        and a loop callback per transfer)."""
        if self.closed:
            raise LinkRefused(f"sender {self.name} is closed")
        self._backlog.append((data, on_settled))
        self._pump()

    def _pump(self) -> None:
        if self.pn is None or not self.attached.done() or self.conn._engine is None:
            return
        engine = self.conn._engine
        sent = False
        while self._backlog and pn.link_credit(self.pn) > 0:
            data, fut = self._backlog.popleft()
            self._tag += 1
            d = engine.send(self.pn, self._tag, data)
            sent = True
            if self.presettled:
                pn.delivery_settle(d)
                if fut is not None:
                    _resolve(fut, _OUTCOMES[pn.ACCEPTED])
            elif fut is not None:
                self._unsettled[d] = fut
        if sent and not self.conn._flush_scheduled:  # one flush a loop turn (no call per send)
            self.conn._flush()

    def _on_flow(self) -> None:
        self._pump()

    def _on_delivery(self, d: Any) -> None:
        state = pn.delivery_remote_state(d)
        if not pn.delivery_settled(d) and state in (0, pn.RECEIVED):
            return
        fut = self._unsettled.pop(d, None)
        if state == pn.REJECTED:
            outcome = Outcome("rejected", pn.remote_rejected_condition(d))
        elif state == pn.MODIFIED:
            failed, undeliverable = pn.remote_modified_flags(d)
            outcome = Outcome("modified", None, failed, undeliverable)
        else:
            # one shared (frozen) outcome per plain state: none made per settlement
            outcome = _OUTCOMES.get(state) or _OUTCOMES[0]
        pn.delivery_settle(d)
        if fut is not None:
            _resolve(fut, outcome)

    def _lost(self, error: Exception) -> None:
        unsettled, self._unsettled = self._unsettled, {}
        for waiter in unsettled.values():
            _resolve(waiter, ConnectionLost(f"connection lost before {self.name}'s send was settled"))
        if self.closed:
            backlog = list(self._backlog)
            self._backlog.clear()
            for _, waiting in backlog:
                if waiting is not None:
                    _resolve(waiting, error)



#: the outcomes without a condition, made once
_OUTCOMES: dict[int, Outcome] = {state: Outcome(name) for state, name in _STATES.items()}


def _resolve(waiter: _Waiter, result: Outcome | BaseException) -> None:
    if isinstance(waiter, asyncio.Future):
        if not waiter.done():
            if isinstance(result, BaseException):
                waiter.set_exception(result)
            else:
                waiter.set_result(result)
        return
    try:
        waiter(result)
    except Exception:  # noqa: BLE001 - a settlement callback must not break the connection
        log.exception("a settlement callback failed")


class IncomingMessage:
    """One received message: its bytes, and the outcome to send back."""

    __slots__ = ("data", "_receiver", "_delivery", "_engine", "settled")

    def __init__(self, data: bytes, receiver: Receiver, delivery: Any, settled: bool) -> None:
        self.data = data
        self._receiver = receiver
        self._delivery = delivery
        self._engine = receiver.conn._engine  # the delivery belongs to this connection only
        self.settled = settled

    @property
    def receiver(self) -> Receiver:
        """The link it came on (its `remote_source` holds what the peer's attach said)."""
        return self._receiver

    def _settle(self, state: int, condition: Condition | None = None, failed: bool = False,
                undeliverable: bool = False) -> None:
        if self.settled:
            return
        self.settled = True
        if self._receiver.pn is None or self._receiver.conn._engine is not self._engine:
            return  # the connection that carried it is gone; the peer redelivers
        pn.settle_with(self._delivery, state, condition, failed, undeliverable)
        self._receiver._settled_one()

    def accept(self) -> None:
        self._settle(pn.ACCEPTED)

    def release(self) -> None:
        self._settle(pn.RELEASED)

    def reject(self, condition: Condition | None = None) -> None:
        self._settle(pn.REJECTED, condition)

    def modify(self, failed: bool = True, undeliverable: bool = False) -> None:
        self._settle(pn.MODIFIED, None, failed, undeliverable)


class Receiver(_Link):
    """Receives messages into `on_message`; credit is topped up to `credit`
    as messages are settled (or at once, for `auto_accept`)."""

    def __init__(self, conn: AmqpConnection, name: str, source: Terminus, target: Terminus,
                 credit: int, on_message: Callable[[IncomingMessage], Any], auto_accept: bool) -> None:
        super().__init__(conn, name, source, target)
        self.window = credit
        self.on_message = on_message
        self.auto_accept = auto_accept
        self._outstanding = 0  # delivered to on_message, not settled
        self._parts: list[bytes] = []

    def _attach(self, session: Any) -> None:
        self.pn = pn.receiver(session, self.name)
        pn.set_source(self.pn, self.source)
        pn.set_target(self.pn, self.target)
        self._set_properties()
        pn.link_open(self.pn)
        self._outstanding = 0
        if self.window:
            pn.link_flow(self.pn, self.window)

    def _on_delivery(self, d: Any) -> None:
        engine = self.conn._engine
        assert engine is not None
        data = pn.take_transfer(engine, self.pn, d, self._parts)
        if data is None:
            return
        settled = bool(pn.delivery_settled(d))
        pn.link_advance(self.pn)
        msg = IncomingMessage(data, self, d, settled)
        self._outstanding += 1
        try:
            self.on_message(msg)
        except Exception:  # noqa: BLE001 - a failing handler must not kill the connection
            log.exception("on_message of receiver %s failed; releasing the message", self.name)
            msg.release()
        if self.auto_accept and not msg.settled:
            msg.accept()
        if settled:
            self._settled_one()

    def _settled_one(self) -> None:
        self._outstanding -= 1
        credit = pn.link_credit(self.pn)
        if self.window and credit + self._outstanding <= self.window // 2:
            pn.link_flow(self.pn, self.window - credit - self._outstanding)
        self.conn._flush()

    def flow(self, credit: int) -> None:
        pn.link_flow(self.pn, credit)
        self.conn._flush()

    def stop(self) -> None:
        """Grant no more credit and drain what is granted (the peer sends what it
        has now, then holds the rest); also after a reconnection. `resume` undoes it."""
        self.window = 0
        if self.pn is not None and self.conn._engine is not None and not self.closed:
            pn.link_drain(self.pn, 0)
            self.conn._flush()

    def resume(self, credit: int) -> None:
        """Top the credit up to `credit` again after `stop`."""
        self.window = credit
        if self.pn is not None and self.conn._engine is not None and not self.closed:
            pn.link_set_drain(self.pn, False)
            missing = credit - pn.link_credit(self.pn) - self._outstanding
            if missing > 0:
                pn.link_flow(self.pn, missing)
            self.conn._flush()
