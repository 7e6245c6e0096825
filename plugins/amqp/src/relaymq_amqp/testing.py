"""A transaction controller for tests that drive AMQP transactions with
python-qpid-proton's BlockingConnection, as Qpid JMS's transacted session does:
a coordinator link, `declare`/`discharge` control messages, transfers and
dispositions in `transactional-state` (AMQP 1.0 part 4)."""

from __future__ import annotations

from typing import Any

from proton import Delivery, Described, Message, Terminus, symbol, ulong
from proton.reactor import LinkOption

TXN_STATE = 0x34
DECLARED = 0x33
ACCEPTED = Described(ulong(0x24), [])
REJECTED = Described(ulong(0x25), [])
RELEASED = Described(ulong(0x26), [])


def modified(failed: bool = False, undeliverable: bool = False) -> Described:
    """The `modified` outcome (delivery-failed, undeliverable-here)."""
    return Described(ulong(0x27), [failed, undeliverable])


class Coordinator(LinkOption):
    """Makes a sender link a transaction controller (what Qpid JMS attaches)."""

    def apply(self, link: Any) -> None:
        link.target.type = Terminus.COORDINATOR
        link.target.capabilities.put_object(symbol("amqp:local-transactions"))


class TxClient:
    """A blocking transaction controller on one BlockingConnection."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.ctrl = conn.create_sender(None, options=Coordinator())

    def _control(self, descriptor: str, fields: list[Any]) -> Any:
        d = self.ctrl.link.send(Message(body=Described(symbol(descriptor), fields)))
        self.conn.wait(lambda: d.remote_state != 0, msg="no answer from the coordinator")
        return d

    def declare(self) -> bytes:
        d = self._control("amqp:declare:list", [None])
        assert d.remote_state == DECLARED, d.remote_state
        return bytes(d.remote.data[0])

    def discharge(self, txn: bytes, fail: bool = False) -> Any:
        return self._control("amqp:discharge:list", [txn, fail])

    def commit(self, txn: bytes) -> None:
        d = self.discharge(txn)
        assert d.remote_state == Delivery.ACCEPTED, (d.remote_state, d.remote.condition)

    def rollback(self, txn: bytes) -> None:
        d = self.discharge(txn, fail=True)
        assert d.remote_state == Delivery.ACCEPTED, (d.remote_state, d.remote.condition)

    def send(self, sender: Any, body: str, txn: bytes, **props: Any) -> Any:
        """A transfer in `txn`; returns the delivery once the broker answered."""
        d = sender.link.send(Message(body=body, durable=True, properties=props or None))
        d.local.data = [txn]
        d.update(TXN_STATE)
        self.conn.wait(lambda: d.remote_state != 0, msg="no answer to a transactional transfer")
        return d

    def accept(self, receiver: Any, txn: bytes, settle: bool = False) -> Any:
        """Accept the oldest received delivery inside `txn` (proton's Transaction.accept)."""
        return self.settle_in(receiver, txn, ACCEPTED, settle)

    def settle_in(self, receiver: Any, txn: bytes, outcome: Described,
                  settle: bool = False) -> Any:
        """Give the oldest received delivery `outcome` inside `txn`:
        a `transactional-state(txn, outcome)` disposition."""
        d = receiver.fetcher.unsettled.popleft()
        d.local.data = [txn, outcome]
        d.update(TXN_STATE)
        if settle:
            d.settle()
        return d
