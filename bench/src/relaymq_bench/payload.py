"""The bench's message body layout, shared by every protocol.

Why in the body and not in headers/properties: the body is the one part every
broker passes through byte-for-byte, for AMQP and STOMP alike, so the checker
works the same against RelayMQ, RabbitMQ or ActiveMQ, and the client patches
fixed offsets instead of encoding properties per message.

Layout (big-endian, 28 bytes), followed by filler up to the message size::

    magic  4s  b"RMQB"    -- lets the receiver reject foreign/garbled bodies
    run    I   run id     -- separates this run's messages from leftovers
    prod   I   producer index
    seq    Q   per-producer sequence number, from 0
    ts     q   send time, time.time_ns() (comparable across processes)
"""

from __future__ import annotations

import struct
from typing import NamedTuple

MAGIC = b"RMQB"
PREFIX = struct.Struct(">4sIIQq")
PREFIX_SIZE = PREFIX.size  # 28
SEQ_OFFSET = 12  # offset of seq (followed by ts) inside the prefix
SEQ_TS = struct.Struct(">Qq")
HEAD = struct.Struct(">4sII")  # magic, run, producer: constant per producer
AFTER_MAGIC = struct.Struct(">IIQq")  # run, producer, seq, ts: read at magic offset + 4


class Stamp(NamedTuple):
    """A decoded prefix."""

    run: int
    producer: int
    seq: int
    ts: int


def make_body(size: int, run: int, producer: int, seq: int = 0, ts: int = 0) -> bytes:
    """A full body of ``size`` bytes; the filler is printable so STOMP dumps stay readable."""
    if size < PREFIX_SIZE:
        raise ValueError(f"message size must be >= {PREFIX_SIZE} bytes (the bench prefix)")
    filler = (b"relaymq-bench." * (size // 14 + 1))[: size - PREFIX_SIZE]
    return PREFIX.pack(MAGIC, run, producer, seq, ts) + filler


def read_stamp(buf: bytes, offset: int) -> Stamp | None:
    """Decode the prefix at ``offset``; None if it is not a bench body."""
    if len(buf) - offset < PREFIX_SIZE:
        return None
    magic, run, producer, seq, ts = PREFIX.unpack_from(buf, offset)
    if magic != MAGIC:
        return None
    return Stamp(run, producer, seq, ts)
