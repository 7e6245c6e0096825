"""Mirror events several to a transfer, between RelayMQ brokers.

Artemis sends each mirror event as its own AMQP message, and so does a RelayMQ
source to a target that is not RelayMQ. A RelayMQ target says in its answer to
the mirror link (the link property `PROPERTY`, true) that it reads batches; the
source, whose attach stays Artemis' own, then sends the events of a run (what it reads in one go, up to `MAX_EVENTS` or
`MAX_BYTES`) in one transfer: an AMQP message

    header{durable} + message-annotations{x-opt-relaymq-mr-batch: true}
    + data(<u32 size><event>...)

whose data section holds each event's own message, exactly as it would be sent
alone. The target applies them in order, as if they had come one by one, and
settles the transfer once every event in it is stored: ``accepted``; or
``rejected`` when it refused some of them, with the (0-based) positions of the
refused ones in the condition's info (`REFUSED`), the others being applied; or
``modified`` when storing failed (the source sends the whole transfer again; the
target drops what it had applied as repeats). Proton's per-transfer work (the
delivery, its frames, its disposition and settlement on both sides) is then
paid once per run instead of once per event.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from relaymq_amqp.encode import header_section, section
from relaymq_amqp.types import Symbol

#: the link property of a target's answer that says it reads batched events
PROPERTY: Final = "x-opt-relaymq-mirror-batch"
#: the annotation that marks a batch
ANNOTATION: Final = "x-opt-relaymq-mr-batch"
#: the info key of a rejected batch's condition: the positions of refused events
REFUSED: Final = "x-opt-relaymq-refused"
#: events in one transfer at most
MAX_EVENTS: Final = 200
#: bytes of events in one transfer (a target's smaller max-message-size wins)
MAX_BYTES: Final = 256 * 1024

_HEAD: Final = header_section(durable=True) + section(0x72, {Symbol(ANNOTATION): True})
_DATA: Final = b"\x00\x53\x75\xb0"
_U32: Final = struct.Struct(">I").pack


class BadBatch(ValueError):
    """A batch whose framing is wrong."""


def pack(events: list[bytes]) -> bytes:
    """One transfer's bytes holding `events` (each an encoded mirror event)."""
    pieces: list[bytes] = []
    size = 0
    for data in events:
        pieces.append(_U32(len(data)))
        pieces.append(data)
        size += 4 + len(data)
    return b"".join((_HEAD, _DATA, _U32(size), *pieces))


def unpack(data: bytes) -> list[bytes] | None:
    """The events of a batch; None when `data` is not a batch (a single event)."""
    if not data.startswith(_HEAD):
        return None
    pos = len(_HEAD)
    if data[pos:pos + 4] != _DATA or len(data) < pos + 8:
        raise BadBatch("a mirror batch must have one data section after its annotations")
    size = int.from_bytes(data[pos + 4:pos + 8], "big")
    pos += 8
    end = pos + size
    if end != len(data):
        raise BadBatch(f"a mirror batch's data section says {size} bytes, "
                       f"{len(data) - pos} follow")
    events: list[bytes] = []
    while pos < end:
        if pos + 4 > end:
            raise BadBatch("a mirror batch's event size runs past its end")
        n = int.from_bytes(data[pos:pos + 4], "big")
        pos += 4
        if n == 0 or pos + n > end:
            raise BadBatch("a mirror batch's event runs past its end")
        events.append(data[pos:pos + n])
        pos += n
    if not events:
        raise BadBatch("a mirror batch holds no event")
    return events


def refused_positions(condition: Any) -> set[int] | None:
    """The refused events' positions a rejected batch names, or None when its
    condition does not say (then every event of it counts as refused)."""
    info = getattr(condition, "info", None)
    if not isinstance(info, dict):
        return None
    for key, value in info.items():
        if str(key) == REFUSED and isinstance(value, list):
            return {int(v) for v in value if isinstance(v, int) and not isinstance(v, bool)}
    return None


def limit(remote_max_message_size: int) -> int:
    """Bytes of events a transfer may carry to a target whose links take messages
    up to `remote_max_message_size` (0: no limit)."""
    if remote_max_message_size <= 0:
        return MAX_BYTES
    return max(min(MAX_BYTES, remote_max_message_size - len(_HEAD) - 64), 0)


class Received:
    """A batch on the target: its delivery, settled once every event is."""

    __slots__ = ("delivery", "left", "refused", "errors", "settled")

    def __init__(self, delivery: Any, count: int) -> None:
        self.delivery = delivery
        self.left = count
        self.refused: list[int] = []
        self.errors: list[str] = []
        self.settled = False

    def done(self, part: Part, error: str | None) -> bool:
        """Note the verdict on `part`; True when it was the batch's last event."""
        if error is not None:
            self.refused.append(part.index)
            if len(self.errors) < 3 and error not in self.errors:
                self.errors.append(error)
        self.left -= 1
        return self.left == 0

    def description(self) -> str:
        return (f"{len(self.refused)} event(s) of the batch refused: "
                + "; ".join(self.errors))


class Part:
    """One event of a `Received` batch, where the target keeps a delivery."""

    __slots__ = ("batch", "index")

    def __init__(self, received: Received, index: int) -> None:
        self.batch = received
        self.index = index
