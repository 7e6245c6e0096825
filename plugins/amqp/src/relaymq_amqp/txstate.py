"""Transactional delivery state (AMQP 1.0 §4.5): what producer and consumer links
need to take part in a transaction, below both them and the coordinator."""

from __future__ import annotations

from typing import Any

from relaymq.errors import TransactionError

from relaymq_amqp import engine as pn
from relaymq_amqp.types import Described, ULong

DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
ACCEPTED = Described(ULong(0x24), [])
OUTCOMES = {0x24: "accepted", 0x25: "rejected", 0x26: "released", 0x27: "modified",
            "amqp:accepted:list": "accepted", "amqp:rejected:list": "rejected",
            "amqp:released:list": "released", "amqp:modified:list": "modified"}
UNKNOWN_ID = "amqp:transaction:unknown-id"
ROLLBACK = "amqp:transaction:rollback"


def kernel_txid(txn_id: bytes) -> str:
    """The kernel transaction id of an AMQP txn-id (ids live per connection)."""
    return "amqp:" + txn_id.hex()


def state_fields(delivery: Any) -> tuple[bytes, str | None]:
    """(txn-id, outcome name or None) of a peer's `transactional-state`.

    :raises TransactionError: when the state does not name a transaction."""
    txn, outcome = state_outcome(delivery)
    if outcome is None:
        return txn, None
    return txn, OUTCOMES.get(outcome.descriptor, "unknown")


def state_outcome(delivery: Any) -> tuple[bytes, Described | None]:
    """(txn-id, the outcome as sent or None) of a peer's `transactional-state`.

    :raises TransactionError: when the state does not name a transaction."""
    data = pn.remote_state_data(delivery)
    if not isinstance(data, list) or not data or not isinstance(data[0], (bytes, bytearray)):
        raise TransactionError(f"a transactional-state without a txn-id: {data!r:.80}")
    outcome = data[1] if len(data) > 1 and isinstance(data[1], Described) else None
    return bytes(data[0]), outcome


def outcome_name(outcome: Described) -> str:
    """accepted, rejected, released, modified or unknown."""
    return OUTCOMES.get(outcome.descriptor, "unknown")


def modified_flags(outcome: Described) -> tuple[bool, bool]:
    """(delivery-failed, undeliverable-here) of a `modified` outcome's fields."""
    fields = outcome.value if isinstance(outcome.value, list) else []
    failed = bool(fields[0]) if len(fields) > 0 and fields[0] is not None else False
    undeliverable = bool(fields[1]) if len(fields) > 1 and fields[1] is not None else False
    return failed, undeliverable


def settle_transactional(delivery: Any, txn_id: bytes, outcome: Described = ACCEPTED) -> None:
    """Answer a transactional transfer or disposition: `transactional-state(txn-id, outcome)`."""
    pn.settle_with_data(delivery, TRANSACTIONAL_STATE, [txn_id, outcome])
