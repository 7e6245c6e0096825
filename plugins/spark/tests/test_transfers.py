"""`split_batch`: the messages of one batched range transfer, as the broker writes them."""

from __future__ import annotations

import struct

import pytest
from relaymq_spark.endpoint import RelayMQError
from relaymq_spark.transfers import split_batch


def transfer(messages: list[tuple[int, int, bytes]]) -> bytes:
    """A transfer as relaymq_amqp.ranges writes one: a data section of heads and bytes."""
    body = b"".join(struct.pack(">QQI", seq, stamp, len(data)) + data
                    for seq, stamp, data in messages)
    return b"\x00\x53\x75\xb0" + struct.pack(">I", len(body)) + body


def test_messages_come_out_as_they_went_in() -> None:
    messages = [(1, 1_700_000_000_000, b"\x00Sw\xa1\x01a"), (2, 0, b""),
                (2**40 + 7, 2**63 - 1, bytes(range(256)) * 5), (2**64 - 1, 5, b"z")]
    assert split_batch(transfer(messages)) == messages


def test_an_empty_section_holds_no_messages() -> None:
    assert split_batch(transfer([])) == []


@pytest.mark.parametrize(("mangle", "error"), [
    (lambda t: b"\x00\x53\x77" + t[3:], "not one data section"),
    (lambda t: t[:5], "not one data section"),
    (lambda t: t[:-1], "wrong length"),
    (lambda t: t + b"x", "wrong length"),
    # the section's length is right, a message's is not
    (lambda t: t[:8] + t[8:24] + struct.pack(">I", 99) + t[28:], "ends inside a message"),
    (lambda t: t[:4] + struct.pack(">I", 10) + t[8:18], "ends inside a message"),
])
def test_a_damaged_transfer_is_refused_with_a_clear_error(mangle, error) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RelayMQError, match=error):
        split_batch(mangle(transfer([(1, 2, b"abc"), (2, 3, b"defg")])))
