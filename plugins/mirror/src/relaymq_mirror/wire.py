"""Artemis' mirror wire format (see /docs/mirror.md and the reference it cites).

Control events are AMQP messages ``header{durable} + message-annotations{...}
+ amqp-value(body)`` whose annotation ``x-opt-amq-mr-ev-type`` (a *symbol*)
names the operation. A mirrored send is the original message with its
delivery-annotations replaced by ``x-opt-amq-mr-id`` (long), optionally
``x-opt-amq-bkr-id`` (string, the broker it came from) and
``x-opt-amq-mr-dst`` (string, the routing address).
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any, Final

from relaymq.model.message import internal_annotation
from relaymq_amqp.encode import encode, header_section, section
from relaymq_amqp.mapping import ENCODING
from relaymq_amqp.scanner import DecodeError, decode, skip
from relaymq_amqp.types import Symbol

MIRROR_ADDRESS = "$ACTIVEMQ_ARTEMIS_MIRROR"
MIRROR_CAPABILITY = "amq.mirror"
CORE_TUNNELING = "AMQ_CORE_MESSAGE_TUNNELING"

EVENT_TYPE: Final = "x-opt-amq-mr-ev-type"
ACK_REASON: Final = "x-opt-amq-mr-ack-reason"
ADDRESS: Final = "x-opt-amq-mr-adr"
QUEUE: Final = "x-opt-amq-mr-qu"
BROKER_ID = "x-opt-amq-bkr-id"
INTERNAL_ID: Final = "x-opt-amq-mr-id"
INTERNAL_DESTINATION = "x-opt-amq-mr-dst"
TARGET_QUEUES = "x-opt-amq-mr-trg-q"
#: RelayMQ's addition on the target's answer: it reads ``queue://X``/``topic://X``
#: addresses (a name can be a queue and a topic at once in RelayMQ); without it
#: (Artemis) addresses go as bare names
PREFIXED_ADDRESSES = "x-opt-relaymq-prefixed-addresses"

ADD_ADDRESS: Final = "addAddress"
DELETE_ADDRESS: Final = "deleteAddress"
CREATE_QUEUE: Final = "createQueue"
DELETE_QUEUE: Final = "deleteQueue"
POST_ACK = "postAck"
EVENTS = (ADD_ADDRESS, DELETE_ADDRESS, CREATE_QUEUE, DELETE_QUEUE, POST_ACK)

# Artemis' AckReason
NORMAL, KILLED, EXPIRED, REPLACED = 0, 1, 2, 3
#: the change feed's removal reasons -> Artemis' ack reason
REASONS = {"acked": NORMAL, "killed": KILLED, "expired": EXPIRED, "replaced": REPLACED,
           "moved": NORMAL, "purged": NORMAL}
#: Artemis' ack reason -> the removal reason the target applies
REMOVALS: Final = {NORMAL: "acked", KILLED: "killed", EXPIRED: "expired", REPLACED: "replaced"}

MULTICAST, ANYCAST = 0, 1

#: message annotation on a stored mirrored message: its internal id at the origin
#: (internal: kept for postAck matching and the next hop, never shown to a client)
ANNOTATION_ID: Final = internal_annotation("mirror_id")

_DA, _MA = 0x71, 0x72
_LONG_CODES: Final = (0x81, 0x55)
_SYMBOL_CODES: Final = (0xA3, 0xB3)
_STRING_CODES: Final = (0xA1, 0xB1)


class BadEvent(ValueError):
    """A mirror message that cannot be applied (wrong annotation type, no id, ...)."""


#: message id -> internal id of recent messages: a message's send, its
#: acknowledgement and the target's index each need it, the hash is made once.
#: Two generations: when the newer is full it becomes the older and the older is
#: dropped, so the last `_IDS_KEPT` ids are always kept (a cache that was cleared
#: when full made every acknowledgement of a backlog past it hash again)
_IDS: dict[str, int] = {}
_IDS_OLD: dict[str, int] = {}
_IDS_KEPT: Final = 32768


def internal_id(message_id: str | None) -> int:
    """A message's internal id (Artemis' ``x-opt-amq-mr-id``, a signed long):
    63 bits of a hash of its message id, the same on every broker and after a
    restart, so an acknowledgement read back from the store finds it again."""
    global _IDS, _IDS_OLD
    key = message_id or ""
    found = _IDS.get(key)
    if found is not None:
        return found
    found = _IDS_OLD.get(key)
    if found is None:
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        found = int.from_bytes(digest, "big") & 0x7FFFFFFFFFFFFFFF
    if len(_IDS) >= _IDS_KEPT:
        _IDS_OLD = _IDS
        _IDS = {}
    _IDS[key] = found
    return found


def id_of(message: Any) -> int:
    """The internal id a message is mirrored under: the one it arrived with by
    mirror, else `internal_id` of its message id."""
    ann = message.annotations
    if ann:
        found = ann.get(ANNOTATION_ID)
        if isinstance(found, int):
            return found
    return internal_id(message.message_id)


# -- control events ----------------------------------------------------------------
def control(event: str, annotations: dict[str, Any], body: Any) -> bytes:
    """A control event as Artemis encodes it."""
    ann: dict[Any, Any] = {Symbol(EVENT_TYPE): Symbol(event)}
    for k, v in annotations.items():
        if v is not None:
            ann[Symbol(k)] = v
    out = header_section(durable=True) + section(_MA, ann)
    if body is not None:
        out += section(0x77, body)
    return out


def add_address(name: str, routing_type: int, created: int = 0) -> bytes:
    body = json.dumps({"id": 0, "name": name, "auto-created": False, "temporary": False,
                       "internal": False, "firstSeen": routing_type,
                       "routingTypes": [routing_type], "created-timestamp": created})
    return control(ADD_ADDRESS, {ADDRESS: name}, body)


def delete_address(name: str, routing_type: int) -> bytes:
    body = json.dumps({"id": 0, "name": name, "auto-created": False, "temporary": False,
                       "internal": False, "routingTypes": [routing_type]})
    return control(DELETE_ADDRESS, {ADDRESS: name}, body)


def create_queue(address: str, queue: str, routing_type: int, selector: str | None = None) -> bytes:
    config: dict[str, Any] = {"name": queue, "address": address,
                              "routing-type": "ANYCAST" if routing_type == ANYCAST else "MULTICAST",
                              "durable": True}
    if selector:
        config["filter-string"] = selector
    return control(CREATE_QUEUE, {ADDRESS: address, QUEUE: queue}, json.dumps(config))


def delete_queue(address: str, queue: str) -> bytes:
    return control(DELETE_QUEUE, {ADDRESS: address, QUEUE: queue}, queue)


def post_ack(address: str, queue: str, ident: int, origin: str | None, reason: int) -> bytes:
    """`control(POST_ACK, ...)` written by hand: one runs per mirrored acknowledgement."""
    body = _POST_ACK_HEAD + _K_ADDRESS + _str(address) + _K_QUEUE + _str(queue)
    count = 6
    if origin is not None:
        body += _K_BROKER + _str(origin)
        count += 2
    if reason != NORMAL:
        body += _K_REASON + bytes((0x51, reason & 0xFF))
        count += 2
    return (_POST_ACK_PREFIX + _MAP32(0xD1, len(body) + 4, count) + body
            + _VALUE_HEAD + _LONG(0x81, ident))


def post_ack_head(address: str, queue: str) -> bytes:
    """The bytes of `post_ack(address, queue, ident, None, NORMAL)` before its
    8-byte id: a source keeps them per (address, queue) and writes each postAck
    as ``head + id`` (`post_ack_with`)."""
    body = _POST_ACK_HEAD + _K_ADDRESS + _str(address) + _K_QUEUE + _str(queue)
    return _POST_ACK_PREFIX + _MAP32(0xD1, len(body) + 4, 6) + body + _VALUE_HEAD + b"\x81"


def post_ack_with(head: bytes, ident: int) -> bytes:
    """A postAck of the most common kind (no origin broker, reason normal) from
    its `post_ack_head`."""
    return head + _ID8(ident)


def subscription_queue(client_id: str, name: str) -> str:
    """Artemis' queue name of a JMS durable subscription: ``clientId.name`` with
    dots (and backslashes) escaped by a backslash."""
    return f"{_escape(client_id)}.{_escape(name)}"


def split_subscription_queue(queue: str) -> tuple[str, str] | None:
    """(client id, name) of an Artemis durable-subscription queue name, or None."""
    out: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(queue):
        c = queue[i]
        if c == "\\" and i + 1 < len(queue):
            cur.append(queue[i + 1])
            i += 2
            continue
        if c == "." and not out:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if not out:
        return None
    return out[0], "".join(cur)


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace(".", "\\.")


# -- data messages --------------------------------------------------------------------
def _section_at(data: bytes, pos: int) -> tuple[int, int]:
    """(code, end) of the message section at `pos`."""
    n = len(data)
    if data[pos] != 0x00 or pos + 2 >= n:
        raise BadEvent(f"not an AMQP message section at offset {pos}")
    c = data[pos + 1]
    if c == 0x53:
        code = data[pos + 2]
    elif c == 0x80:
        code = int.from_bytes(data[pos + 2:pos + 10], "big")
    else:
        code = -1
    try:
        end = skip(data, pos)
    except (DecodeError, IndexError) as exc:
        raise BadEvent(f"undecodable message section at offset {pos}: {exc}") from None
    if end > n:
        raise BadEvent("message section runs past the end")
    return code, end


_EVENT_TYPE_NAME: Final = EVENT_TYPE.encode()
_DA_HEAD: Final = b"\x00\x53\x71"
_MA_HEAD: Final = b"\x00\x53\x72"
_K_ID: Final = encode(Symbol(INTERNAL_ID))
_K_BROKER: Final = encode(Symbol(BROKER_ID))
_K_DST: Final = encode(Symbol(INTERNAL_DESTINATION))
_LONG: Final = struct.Struct(">Bq").pack
_ID8: Final = struct.Struct(">q").pack
_MAP32: Final = struct.Struct(">BII").pack


_K_ADDRESS: Final = encode(Symbol(ADDRESS))
_K_QUEUE: Final = encode(Symbol(QUEUE))
_K_REASON: Final = encode(Symbol(ACK_REASON))
_POST_ACK_HEAD: Final = encode(Symbol(EVENT_TYPE)) + encode(Symbol(POST_ACK))
_POST_ACK_PREFIX: Final = header_section(durable=True) + b"\x00\x53\x72"
_VALUE_HEAD: Final = b"\x00\x53\x77"
_VALUE_LONG: Final = _VALUE_HEAD + b"\x81"


def _str(value: str) -> bytes:
    b = value.encode()
    n = len(b)
    return (b"\xa1" + bytes((n,)) + b) if n < 256 else (b"\xb1" + n.to_bytes(4, "big") + b)


def mirror_annotations(origin: str | None, address: str) -> tuple[bytes, bytes]:
    """The mirror's delivery-annotation section of a message from `origin` (None:
    this broker) routed to `address`, as the bytes before and after its 8-byte
    internal id: a source keeps them per (origin, address) and only writes the id
    of each message between them (`with_annotations`)."""
    after = b""
    count = 4
    if origin is not None:
        after = _K_BROKER + _str(origin)
        count += 2
    after += _K_DST + _str(address)
    size = len(_K_ID) + 9 + len(after)
    return _DA_HEAD + _MAP32(0xD1, size + 4, count) + _K_ID + b"\x81", after


def with_mirror_annotations(data: bytes, ident: int, origin: str | None, address: str) -> bytes:
    """The message bytes with their delivery annotations replaced by the mirror's."""
    before, after = mirror_annotations(origin, address)
    return with_annotations(data, ident, before, after)


def _described_end(data: bytes, pos: int, n: int) -> int:
    """The end of the section at `pos` (``00 53 code`` then a list or map): read
    from its size, the way a header and delivery annotations are written (a
    section of another form is skipped the general way)."""
    c = data[pos + 3]
    if c == 0x45:  # list0
        return pos + 4
    if c == 0xC0 or c == 0xC1:  # list8, map8: a one-byte size of what follows it
        return pos + 5 + data[pos + 4]
    if (c == 0xD0 or c == 0xD1) and pos + 8 <= n:  # list32, map32
        return pos + 8 + int.from_bytes(data[pos + 4:pos + 8], "big")
    return skip(data, pos)


def with_annotations(data: bytes, ident: int, before: bytes, after: bytes) -> bytes:
    """The message bytes with their delivery annotations replaced by the mirror's,
    given as `mirror_annotations` makes them (runs once per mirrored message)."""
    pos = 0
    n = len(data)
    try:
        if n > 3 and data[0] == 0 and data[1] == 0x53 and data[2] == 0x70:  # header
            pos = _described_end(data, 0, n)
        head = pos
        if pos + 3 < n and data[pos] == 0 and data[pos + 1] == 0x53 and data[pos + 2] == _DA:
            pos = _described_end(data, pos, n)
    except (DecodeError, IndexError) as exc:
        raise BadEvent(f"undecodable message: {exc}") from None
    if pos > n:
        raise BadEvent("undecodable message: a section runs past the end")
    if head == 0:
        return b"".join((before, _ID8(ident), after, data[pos:] if pos else data))
    return b"".join((data[:head], before, _ID8(ident), after, data[pos:]))


def _str_at(data: bytes, pos: int, end: int) -> tuple[str, int] | None:
    """The str8/str32 at `pos` (ending by `end`) and where it ends, or None."""
    code = data[pos]
    if code == 0xA1:
        start = pos + 2
        stop = start + data[pos + 1]
    elif code == 0xB1:
        start = pos + 5
        stop = start + int.from_bytes(data[pos + 1:start], "big")
    else:
        return None
    if stop > end:
        return None
    try:
        return data[start:stop].decode(), stop
    except UnicodeDecodeError:
        return None


_POST_ACK_BASE: Final = len(_POST_ACK_PREFIX)
_HEAD_LEN: Final = len(_POST_ACK_HEAD)


class PostAck:
    """The fields of a postAck the target applies."""

    __slots__ = ("address", "queue", "ident", "reason")

    def __init__(self, address: str, queue: str, ident: int, reason: str) -> None:
        self.address = address
        self.queue = queue
        self.ident = ident
        self.reason = reason


def post_ack_of(inc: Incoming) -> PostAck:
    """The postAck in an event read the general way (raises `BadEvent`)."""
    return PostAck(inc.string(ADDRESS) or "", inc.string(QUEUE) or "", inc.ack_id(),
                   REMOVALS[inc.ack_reason()])


def read_post_ack(data: bytes) -> PostAck | None:
    """A postAck laid out exactly as `post_ack` writes it (a RelayMQ source), read
    at fixed places without taking the message apart; None for anything else (an
    Artemis source's, a message, a malformed one): `Incoming` reads those."""
    base = _POST_ACK_BASE
    n = len(data)
    if n < base + 9 + _HEAD_LEN or not data.startswith(_POST_ACK_PREFIX) or data[base] != 0xD1:
        return None
    end = base + 5 + int.from_bytes(data[base + 1:base + 5], "big")
    p = base + 9
    if end + 12 != n or not data.startswith(_POST_ACK_HEAD, p):
        return None
    p += _HEAD_LEN
    if not data.startswith(_K_ADDRESS, p):
        return None
    got = _str_at(data, p + len(_K_ADDRESS), end)
    if got is None:
        return None
    address, p = got
    if not data.startswith(_K_QUEUE, p):
        return None
    got = _str_at(data, p + len(_K_QUEUE), end)
    if got is None:
        return None
    queue, p = got
    if data.startswith(_K_BROKER, p):
        got = _str_at(data, p + len(_K_BROKER), end)
        if got is None:
            return None
        p = got[1]
    reason = NORMAL
    if data.startswith(_K_REASON, p):
        q = p + len(_K_REASON)
        if q + 2 > end or data[q] != 0x51:
            return None
        reason = data[q + 1]
        p = q + 2
    if p != end or not data.startswith(_VALUE_LONG, end):
        return None
    ident = int.from_bytes(data[end + 4:n], "big", signed=True)
    return PostAck(address, queue, ident, REMOVALS.get(reason, "acked"))


class Mirrored:
    """A mirrored message as a RelayMQ source writes it (`with_mirror_annotations`):
    its internal id, origin, routing address and the bytes without the mirror's
    delivery annotations."""

    __slots__ = ("ident", "origin", "address", "message_bytes")

    def __init__(self, ident: int, origin: str | None, address: str, message_bytes: bytes) -> None:
        self.ident = ident
        self.origin = origin
        self.address = address
        self.message_bytes = message_bytes


def read_mirrored(data: bytes) -> Mirrored | None:
    """The mirror's delivery annotations laid out exactly as
    `with_mirror_annotations` writes them, read at fixed places; None for
    anything else (an event, an Artemis source's message): `Incoming` reads those.
    The rest of the message is `to_kernel`'s to read and check."""
    n = len(data)
    head = 0
    try:
        if n > 3 and data[0] == 0 and data[1] == 0x53 and data[2] == 0x70:  # header
            head = skip(data, 0)
    except (DecodeError, IndexError):
        return None
    p = head + 3
    if p + 9 + len(_K_ID) + 9 > n or not data.startswith(_DA_HEAD, head) or data[p] != 0xD1:
        return None
    end = p + 5 + int.from_bytes(data[p + 1:p + 5], "big")
    q = p + 9
    if end > n or not data.startswith(_K_ID, q) or data[q + len(_K_ID)] != 0x81:
        return None
    q += len(_K_ID) + 1
    ident = int.from_bytes(data[q:q + 8], "big", signed=True)
    q += 8
    origin: str | None = None
    if data.startswith(_K_BROKER, q):
        got = _str_at(data, q + len(_K_BROKER), end)
        if got is None:
            return None
        origin, q = got
    if not data.startswith(_K_DST, q):
        return None
    got = _str_at(data, q + len(_K_DST), end)
    if got is None or got[1] != end:
        return None
    if data.startswith(_MA_HEAD, end):
        try:
            ma_end = skip(data, end)
        except (DecodeError, IndexError):
            return None
        if data.find(_EVENT_TYPE_NAME, end, ma_end) >= 0:
            return None  # its annotations may name an event: read the general way
    return Mirrored(ident, origin, got[0], data[:head] + data[end:])


def _raw_map(data: bytes, start: int, end: int) -> dict[str, tuple[int, Any]]:
    """A section's map as {key: (type code of the value, value)}."""
    pos = start + 3 if data[start + 1] == 0x53 else start + 10
    code = data[pos]
    if code == 0xC1:
        count, p = data[pos + 2], pos + 3
    elif code == 0xD1:
        count, p = int.from_bytes(data[pos + 5:pos + 9], "big"), pos + 9
    else:
        raise BadEvent(f"annotations must be a map, not type 0x{code:02x}")
    out: dict[str, tuple[int, Any]] = {}
    size = len(data)
    for _ in range(count // 2):
        key: Any = None
        if data[p] == 0xA3:  # a sym8 key (every mirror annotation): read as a plain str
            key_end = p + 2 + data[p + 1]
            if key_end <= size:
                try:
                    key = data[p + 2:key_end].decode("ascii")
                    p = key_end
                except UnicodeDecodeError:
                    key = None
        if key is None:
            key, p = decode(data, p)  # anything else (and the errors) the general way
        vcode = data[p]
        value, p = decode(data, p)
        out[str(key)] = (vcode, value)
    if p > end:
        raise BadEvent("annotations run past their section")
    return out


class Incoming:
    """One message received on a mirror link, taken apart."""

    __slots__ = ("event", "annotations", "body", "message_bytes", "delivery_annotations")

    def __init__(self, data: bytes) -> None:
        self.event: str | None = None
        self.annotations: dict[str, tuple[int, Any]] = {}
        self.delivery_annotations: dict[str, tuple[int, Any]] = {}
        self.body: Any = None
        self.message_bytes = data
        da_start = da_end = -1
        pos = 0
        n = len(data)
        while pos < n:
            code, end = _section_at(data, pos)
            if code == _DA:
                self.delivery_annotations = _raw_map(data, pos, end)
                da_start, da_end = pos, end
            elif code == _MA:
                if data.find(_EVENT_TYPE_NAME, pos, end) >= 0:
                    # read only when it may name an event: a mirrored message's own
                    # annotations are the target's to keep, not to read here
                    self.annotations = _raw_map(data, pos, end)
            elif code == 0x70:
                pass  # the header
            elif EVENT_TYPE not in self.annotations:
                # properties or later of a mirrored message: `to_kernel` reads
                # (and checks) them, once
                break
            elif code == 0x77:
                vpos = pos + 3 if data[pos + 1] == 0x53 else pos + 10
                self.body = (data[vpos], decode(data, vpos)[0])
            pos = end
        ev = self.annotations.get(EVENT_TYPE)
        if ev is not None:
            vcode, value = ev
            if vcode not in _SYMBOL_CODES:
                raise BadEvent(f"{EVENT_TYPE} must be a symbol (it was type 0x{vcode:02x})")
            self.event = str(value)
        elif da_start >= 0:
            self.message_bytes = data[:da_start] + data[da_end:]

    def string(self, key: str, where: str = "annotations", required: bool = True) -> str | None:
        found = (self.annotations if where == "annotations" else self.delivery_annotations).get(key)
        if found is None:
            if required:
                raise BadEvent(f"{self.event or 'message'} without {key}")
            return None
        code, value = found
        if code not in _STRING_CODES and code not in _SYMBOL_CODES:
            raise BadEvent(f"{key} must be a string (it was type 0x{code:02x})")
        return str(value)

    def mirror_id(self) -> int:
        found = self.delivery_annotations.get(INTERNAL_ID)
        if found is None:
            raise BadEvent(f"a mirrored message without the delivery annotation {INTERNAL_ID}")
        code, value = found
        if code not in _LONG_CODES:
            raise BadEvent(f"{INTERNAL_ID} must be a long (it was type 0x{code:02x})")
        return int(value)

    def ack_id(self) -> int:
        if self.body is None:
            raise BadEvent("postAck without a body")
        code, value = self.body
        if code not in _LONG_CODES:
            raise BadEvent(f"the body of postAck must be a long (it was type 0x{code:02x})")
        return int(value)

    def ack_reason(self) -> int:
        found = self.annotations.get(ACK_REASON)
        if found is None:
            return NORMAL
        value = found[1]
        if not isinstance(value, (int, float)):
            raise BadEvent(f"{ACK_REASON} must be a number")
        reason = int(value) & 0xFF
        return reason if reason in REMOVALS else NORMAL

    def json_body(self) -> dict[str, Any]:
        if self.body is None:
            raise BadEvent(f"{self.event} without a body")
        value = self.body[1]
        if isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError as exc:
                raise BadEvent(f"{self.event}: the body is not JSON: {exc}") from None
            if isinstance(parsed, dict):
                return parsed
        raise BadEvent(f"{self.event}: the body must be a JSON object string")


def raw_message(data: bytes) -> Any:
    """A kernel message that carries already encoded AMQP bytes (sent as they are)."""
    from relaymq.model.message import Message

    return Message(b"", encoded=data, encoding=ENCODING)
