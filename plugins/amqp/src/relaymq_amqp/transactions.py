"""AMQP local transactions (AMQP 1.0 part 4): the coordinator and transactional state.

A client (Qpid JMS's transacted session, proton's `declare_transaction`) attaches a
sender link whose target is a *coordinator*, and sends it control messages:
`declare` (answered with the `declared` state carrying a new txn-id) and
`discharge` (txn-id, fail: commit when fail is false, roll back when true;
answered `accepted`, or `rejected` with `amqp:transaction:rollback` when the
commit failed, `amqp:transaction:unknown-id` for an id that is not active).

Each declared transaction is a kernel `LocalTransaction` of the connection, the
same mechanism STOMP's BEGIN/COMMIT/ABORT use: transfers whose state is
`transactional-state(txn-id)` are routed when they arrive but held until commit;
a `transactional-state(txn-id, accepted)` disposition on a delivery acknowledges
it inside the transaction (on rollback it returns to its queue as redelivered).

Transactions belong to the connection. They are rolled back when the
coordinator link that declared them detaches (so also when its session ends)
and when the connection closes.

Discharges go through the connection's send pipeline, behind the transfers that
arrived before them, so a commit covers every transfer the client sent first.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from relaymq.errors import TransactionError

from relaymq_amqp import engine as pn
from relaymq_amqp.engine import Condition
from relaymq_amqp.scanner import DecodeError, decode, scan
from relaymq_amqp.txstate import DECLARED, ROLLBACK, UNKNOWN_ID, kernel_txid
from relaymq_amqp.types import Described

log = logging.getLogger("relaymq.amqp")

DECLARE = (0x31, "amqp:declare:list")
DISCHARGE = (0x32, "amqp:discharge:list")
CAPABILITIES = ["amqp:local-transactions", "amqp:multi-txns-per-ssn", "amqp:multi-ssns-per-txn"]

_numbers = itertools.count(1)


class CoordinatorLink:
    """The broker's receiver for a client's transaction controller. (`conn` is the
    `AmqpConnection`; this module stays below it and its links.)"""

    window = 100

    def __init__(self, conn: Any, link: Any) -> None:
        self.conn = conn
        self.link = link
        self.session = pn.link_session(link)
        self.closed = False
        self.declared: set[bytes] = set()  # active transactions declared on this link
        self._partial: list[bytes] = []
        assert conn.engine is not None
        self._recv = conn.engine.recv

    def attach(self) -> None:
        target = pn.remote_target(self.link)
        target.capabilities = list(CAPABILITIES)
        pn.set_target(self.link, target)
        pn.set_source(self.link, pn.remote_source(self.link))
        pn.link_open(self.link, snd_settle_mode=pn.link_remote_snd_settle_mode(self.link),
                     rcv_settle_mode=pn.RCV_FIRST)
        pn.link_flow(self.link, self.window)

    def on_delivery(self, d: Any) -> None:
        if self.closed:
            return
        link = self.link
        n = pn.delivery_pending(d)
        if n:
            self._partial.append(self._recv(link, n))
        if pn.delivery_partial(d):
            return
        if not self._partial:
            return  # an update of a control message we already took
        data = b"".join(self._partial)
        self._partial.clear()
        pn.link_advance(link)
        if pn.link_credit(link) < self.window // 2:
            pn.link_flow(link, self.window - pn.link_credit(link))
        try:
            kind, fields = _control(data)
            if kind == "declare":
                self._declare(d, fields)
            else:
                txn_id, fail = _discharge_fields(fields)
                self.conn.submit_control(self, d, txn_id, fail)
        except (DecodeError, TransactionError) as exc:
            self._reject(d, Condition("amqp:decode-error" if isinstance(exc, DecodeError)
                                      else UNKNOWN_ID, str(exc)))
        self.conn.want_flush()

    def _declare(self, d: Any, fields: list[Any]) -> None:
        if fields and fields[0] is not None:
            self._reject(d, Condition("amqp:not-implemented",
                                      "RelayMQ supports local transactions only (no global-id)"))
            return
        kconn = self.conn.kconn
        assert kconn is not None
        txn_id = b"txn:%d" % next(_numbers)
        kconn.begin(kernel_txid(txn_id))
        self.declared.add(txn_id)
        self.conn.transactions[txn_id] = self
        pn.settle_with_data(d, DECLARED, [txn_id])

    async def discharge(self, d: Any, txn_id: bytes, fail: bool) -> None:
        """Commit or roll back (from the connection's send pipeline, in order)."""
        conn = self.conn
        kconn = conn.kconn
        if conn.transactions.get(txn_id) is None or kconn is None:
            self._reject(d, Condition(UNKNOWN_ID, f"no active transaction {txn_id!r}"))
            return
        owner = conn.transactions.pop(txn_id)
        owner.declared.discard(txn_id)
        txid = kernel_txid(txn_id)
        try:
            if fail:
                kconn.rollback(txid)
            else:
                await kconn.commit(txid)
        except TransactionError as exc:
            self._reject(d, Condition(ROLLBACK, str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - the client learns why its commit failed
            log.info("commit of AMQP transaction %r failed: %s", txn_id, exc)
            self._reject(d, Condition(ROLLBACK, f"{type(exc).__name__}: {exc}"))
            return
        if not self.closed:
            pn.delivery_update(d, pn.ACCEPTED)
            pn.delivery_settle(d)

    def _reject(self, d: Any, condition: Condition) -> None:
        log.debug("AMQP transaction control refused: %s", condition)
        if not self.closed:
            pn.settle_with(d, pn.REJECTED, condition)

    def on_remote_close(self, closed: bool) -> None:
        self.close(None, closed)

    def close(self, condition: Condition | None = None, closed: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        self.detached()
        if closed:
            pn.link_close(self.link, condition)
        else:
            pn.link_detach(self.link, condition)
        self.conn.coordinator_closed(self)

    def detached(self) -> None:
        """The controller went away: its transactions that are still active roll back."""
        kconn = self.conn.kconn
        for txn_id in list(self.declared):
            self.conn.transactions.pop(txn_id, None)
            if kconn is not None and kernel_txid(txn_id) in kconn.transactions:
                kconn.rollback(kernel_txid(txn_id))
        self.declared.clear()


def _control(data: bytes) -> tuple[str, list[Any]]:
    """("declare"|"discharge", fields) of a control message's amqp-value body."""
    s = scan(data)
    if s.body_start == s.body_end:
        raise DecodeError("a transaction control message needs an amqp-value body")
    section, _ = decode(data, s.body_start)
    value = section.value if isinstance(section, Described) else None
    if isinstance(value, Described) and isinstance(value.value, list):
        if value.descriptor in DECLARE:
            return "declare", value.value
        if value.descriptor in DISCHARGE:
            return "discharge", value.value
    raise DecodeError(f"not a declare or discharge: {value!r:.80}")


def _discharge_fields(fields: list[Any]) -> tuple[bytes, bool]:
    if not fields or not isinstance(fields[0], (bytes, bytearray)):
        raise TransactionError("a discharge needs a txn-id")
    fail = bool(fields[1]) if len(fields) > 1 and fields[1] is not None else False
    return bytes(fields[0]), fail
