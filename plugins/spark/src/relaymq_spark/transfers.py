"""The messages of one batched range transfer (``relaymq-seq-batch``, written by
relaymq_amqp.ranges): one AMQP data section holding, per message, a u64
sequence number, a u64 broker timestamp (ms), a u32 length and the message's
stored AMQP bytes.

Compiled with mypyc (`[tool.relaymq.compile]` of relaymq-spark): it runs once
per message a live read hands to Spark, so it reads the heads with byte
arithmetic rather than struct calls.
"""

from __future__ import annotations

from typing import Final

from relaymq_spark.endpoint import RelayMQError

#: one stored message as read: (sequence number, broker timestamp in ms, AMQP bytes)
Encoded = tuple[int, int, bytes]

_DATA_SECTION: Final = b"\x00\x53\x75\xb0"  # described (0x75: data), vbin32
_SECTION_HEAD: Final = 8
_MESSAGE_HEAD: Final = 20  # u64 seq, u64 timestamp, u32 length


def split_batch(data: bytes) -> list[Encoded]:
    """The messages of one batched transfer, in order."""
    if not data.startswith(_DATA_SECTION) or len(data) < _SECTION_HEAD:
        raise RelayMQError("a batched range transfer is not one data section")
    end = _SECTION_HEAD + u32(data, 4)
    if end != len(data):
        raise RelayMQError("a batched range transfer has a wrong length")
    out: list[Encoded] = []
    pos = _SECTION_HEAD
    while pos < end:
        if pos + _MESSAGE_HEAD > end:
            raise RelayMQError("a batched range transfer ends inside a message")
        seq = u64(data, pos)
        stamp = u64(data, pos + 8)
        n = u32(data, pos + 16)
        pos += _MESSAGE_HEAD
        if pos + n > end:
            raise RelayMQError("a batched range transfer ends inside a message")
        out.append((seq, stamp, data[pos:pos + n]))
        pos += n
    return out


def u32(data: bytes, pos: int) -> int:
    """The big-endian unsigned 32-bit integer at data[pos] (compiled: no tuple, no call
    into struct); the caller checked that the bytes are there."""
    return (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]


def u64(data: bytes, pos: int) -> int:
    return (u32(data, pos) << 32) | u32(data, pos + 4)


__all__ = ["Encoded", "split_batch", "u32", "u64"]
