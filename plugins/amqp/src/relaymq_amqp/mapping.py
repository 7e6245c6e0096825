"""AMQP messages and addresses <-> the kernel's `Message` and `Destination`.

Inbound, a kernel message keeps the received bytes (`encoded`, encoding
``"amqp"``) and copies only the fields routing needs; application properties
load lazily. Outbound, an AMQP message goes out as it came in (with a new
header section when it is a redelivery); a message from another protocol is
encoded once from its fields.

Field mapping (AMQP -> kernel): header durable/priority/ttl -> durable,
priority, expiration; properties message-id, user-id, subject (JMSType),
reply-to, correlation-id, content-type, absolute-expiry-time, creation-time,
group-id, group-sequence -> the fields of the same meaning. Non-string ids
follow Qpid JMS: ``AMQP_ULONG:``, ``AMQP_UUID:``, ``AMQP_BINARY:`` prefixes.
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any, Final

from relaymq.errors import MessageFormatError
from relaymq.model.destination import Destination, DestinationKind, InvalidDestination
from relaymq.model.jtypes import INT_MAX, Int32, wrap_long
from relaymq.model.message import (
    DEFAULT_PRIORITY,
    BodyType,
    Message,
    client_annotations,
    internal_annotation,
    now_millis,
    register_carry_over,
    wire_message,
)

from relaymq_amqp import encode as enc
from relaymq_amqp.scanner import (
    APPLICATION_PROPERTIES,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    DecodeError,
    Sections,
    body_value,
    check_sections,
    check_text,
    decode,
    decode_map_at,
    plain_body,
    scan,
)
from relaymq_amqp.types import Described, RawValue, Symbol, Timestamp, UByte, UInt, ULong

log = logging.getLogger("relaymq.amqp")

ENCODING: Final = "amqp"

# Qpid JMS message annotations.
JMS_MSG_TYPE: Final = "x-opt-jms-msg-type"
JMS_DEST: Final = "x-opt-jms-dest"

# The JMS selector source filter (Qpid JMS, ActiveMQ, Artemis): its descriptor, as a
# code or a name, and the filter-map key Qpid JMS writes.
SELECTOR_FILTER_CODE: Final = 0x0000468C00000004
SELECTOR_FILTER_NAME: Final = "apache.org:selector-filter:string"


def is_selector_filter(key: Any, value: Any) -> bool:
    """Whether one entry of a terminus's filter map is a JMS selector."""
    descriptor = value.descriptor if isinstance(value, Described) else None
    return descriptor in (SELECTOR_FILTER_CODE, SELECTOR_FILTER_NAME) or key == "jms-selector"
JMS_REPLY_TO: Final = "x-opt-jms-reply-to"
#: the internal annotation that keeps the producer's own message annotations (their
#: AMQP map, encoded) on a copy that drops the message's bytes (`Message.copy`: a
#: dead-letter copy, a scheduled delivery, a bridged or moved message), as Artemis
#: keeps them
CARRIED_ANNOTATIONS: Final = internal_annotation("amqp_message_annotations")
#: message annotations a copy does not keep: what `from_kernel` writes from the
#: kernel's fields, a scheduling request the scheduler took, and a mirror's own
_NOT_CARRIED: Final = frozenset({JMS_MSG_TYPE, JMS_DEST, JMS_REPLY_TO, "x-opt-delivery-time",
                          "x-opt-delivery-delay"})
_NOT_CARRIED_PREFIX: Final = "x-opt-amq-mr-"
_JMS_TYPE_FOR_BODY: Final = {
    BodyType.EMPTY: 0, BodyType.OBJECT: 1, BodyType.MAP: 2, BodyType.BYTES: 3,
    BodyType.STREAM: 4, BodyType.TEXT: 5,
}
_DEST_TYPE: Final = {
    DestinationKind.QUEUE: 0, DestinationKind.TOPIC: 1,
    DestinationKind.TEMP_QUEUE: 2, DestinationKind.TEMP_TOPIC: 3,
}
_KIND_FOR_TYPE: Final = {v: k for k, v in _DEST_TYPE.items()}

_CAPABILITY_KINDS: Final = {
    "topic": DestinationKind.TOPIC,
    "queue": DestinationKind.QUEUE,
    "temporary-queue": DestinationKind.TEMP_QUEUE,
    "temporary-topic": DestinationKind.TEMP_TOPIC,
}
_PREFIXED: Final = ("queue://", "topic://", "temp-queue://", "temp-topic://")


# ---------------------------------------------------------------------------
# Addresses
# ---------------------------------------------------------------------------


def kind_from_capabilities(capabilities: list[str] | tuple[str, ...] | None,
                           default: DestinationKind = DestinationKind.QUEUE) -> DestinationKind:
    """The destination kind a terminus asks for (Qpid JMS capabilities)."""
    if capabilities:
        for cap in capabilities:
            kind = _CAPABILITY_KINDS.get(cap)
            if kind is not None:
                return kind
    return default


def destination_for(address: str, capabilities: list[str] | tuple[str, ...] | None = None,
                    default: DestinationKind = DestinationKind.QUEUE) -> Destination:
    """`queue://X`, `topic://X`, `temp-queue://X`, `temp-topic://X`, or a bare name
    whose kind comes from the terminus capabilities (a queue when none says)."""
    if address.startswith(_PREFIXED):
        return Destination.parse(address)
    return Destination.parse(address, kind_from_capabilities(capabilities, default))


def capabilities_for(dest: Destination) -> list[str]:
    return {
        DestinationKind.QUEUE: ["queue"], DestinationKind.TOPIC: ["topic"],
        DestinationKind.TEMP_QUEUE: ["temporary-queue"],
        DestinationKind.TEMP_TOPIC: ["temporary-topic"],
    }[dest.kind]


# ---------------------------------------------------------------------------
# Ids
# ---------------------------------------------------------------------------


def id_to_str(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, uuid.UUID):
        return f"AMQP_UUID:{value}"
    if isinstance(value, int):
        return f"AMQP_ULONG:{value}"
    if isinstance(value, (bytes, bytearray)):
        return f"AMQP_BINARY:{bytes(value).hex().upper()}"
    return str(value)


#: the largest AMQP ulong
ULONG_MAX: Final = (1 << 64) - 1


def str_to_id(value: str | None) -> Any:
    """The AMQP id for a JMS-style id string: `AMQP_ULONG:<n>` a ulong,
    `AMQP_UUID:` a uuid, `AMQP_BINARY:<hex>` binary, `AMQP_STRING:` the string
    after it. A prefixed string that does not hold a valid value of its type
    (`AMQP_ULONG:` past 2^64-1, negative or not decimal digits, a malformed
    uuid, odd or non-hex binary) stays the whole string, as ActiveMQ's AMQP
    transport keeps it when `AMQPMessageIdHelper.toIdObject` refuses it: every
    id a STOMP or JMS producer can give has an AMQP form."""
    if value is None:
        return None
    try:
        if value.startswith("AMQP_ULONG:"):
            digits = value[11:]
            if digits.isascii() and digits.isdigit():
                n = int(digits)
                if n <= ULONG_MAX:
                    return ULong(n)
            return value
        if value.startswith("AMQP_UUID:"):
            return uuid.UUID(value[10:])
        if value.startswith("AMQP_BINARY:"):
            return bytes.fromhex(value[12:])
        if value.startswith("AMQP_STRING:"):
            return value[12:]
    except ValueError:
        pass
    return value


# ---------------------------------------------------------------------------
# AMQP -> kernel
# ---------------------------------------------------------------------------

_PLAIN: Final = Sections()  # what `to_kernel` returns for a message that is only a body

_BODY_TYPES: Final = {
    "data": BodyType.BYTES, "binary": BodyType.BYTES, "string": BodyType.TEXT,
    "null": BodyType.EMPTY, "value": BodyType.AMQP_VALUE, "sequence": BodyType.AMQP_SEQUENCE,
}


def _kernel_properties(props: dict[Any, Any]) -> dict[str, Any]:
    """Application properties as the kernel compares them, mapped as ActiveMQ
    maps them to JMS types: a ulong is a long and a symbol a string; a uint is
    an int when it fits one, else a long (the decoder returns uints as plain
    ints, so a plain int here is a uint). byte, short, int, ubyte, ushort
    (Java ints), long and float keep their decoder types, which selectors read.
    (The message's bytes keep the AMQP types for AMQP consumers.) A key that
    is not a string (AMQP allows none; a sender's own encoder may send one)
    becomes its text. `props` is typed `dict[Any, Any]` so the compiled build
    does not refuse such a key before it is converted."""
    if not all(isinstance(k, str) for k in props):
        props = {k if isinstance(k, str) else _text_field(k): v for k, v in props.items()}
    for key, value in props.items():
        t = type(value)
        if t is ULong:
            props[key] = wrap_long(int(value))
        elif t is Symbol:
            props[key] = str(value)
        elif t is int:
            props[key] = Int32(value) if value <= INT_MAX else value
    return props


def _props_at(data: bytes, span: tuple[int, int], message: Message) -> dict[str, Any]:
    try:
        return _kernel_properties(decode_map_at(data, span))
    except DecodeError as exc:
        return _unreadable(message, exc)


def load_properties(message: Message) -> dict[str, Any]:
    """The registered lazy loader: application properties of a stored AMQP message."""
    data = message.encoded
    if data is None:
        return {}
    try:
        return _kernel_properties(decode_map_at(data, scan(data).application_properties))
    except DecodeError as exc:
        return _unreadable(message, exc)


def _unreadable(message: Message, exc: DecodeError) -> dict[str, Any]:
    """Application properties are decoded only when a selector (or another
    protocol) asks, long after the message was accepted; ones that cannot be
    decoded (nested deeper than the decoder's limit, say -- AMQP allows only
    simple values there) read as none. The message itself is kept and delivered
    as it came."""
    log.warning("AMQP message %s: its application properties cannot be decoded (%s); "
                "selectors and other protocols see none", message.message_id, exc)
    return {}


def stored_body(data: bytes) -> bytes:
    """The registered body reader: the body `to_kernel` gives a message of `data`."""
    quick = plain_body(data)
    if quick is not None:
        return quick[1]
    return body_value(data, scan(data))[1]


def to_kernel(data: bytes, destination: Destination | None) -> tuple[Message, Sections]:
    """A kernel message for received AMQP bytes. `destination` None means the
    anonymous relay: the message's `to` (and `x-opt-jms-dest`) names it.
    Raises `DecodeError` for bytes that are not an AMQP message, and
    `InvalidDestination` when no destination can be found.

    The message is made with the few fields every message has; the others are
    set only when the bytes carry them (most messages carry few)."""
    quick = plain_body(data)
    if quick is not None and destination is not None:
        kind, body, durable = quick
        if kind == "string":
            check_text(body)
        m = wire_message(body, destination, _BODY_TYPES[kind], data, ENCODING)
        if durable:
            m.durable = True
        return m, _PLAIN
    s = scan(data)
    check_sections(data, s)
    h = s.header
    p = s.properties
    if p:
        p = p + [None] * (13 - len(p)) if len(p) < 13 else p
        if destination is None:
            destination = _relay_destination(p[2], s, data)
    elif destination is None:
        destination = _relay_destination(None, s, data)
    kind, body = body_value(data, s)
    aps = s.application_properties
    m = wire_message(body, destination, _BODY_TYPES[kind], data, ENCODING, None,
                     None if aps is None else partial(_props_at, data, aps))
    ttl = 0
    if h:
        n = len(h)
        if h[0]:
            m.durable = True
        if n > 1 and h[1] is not None:
            m.priority = _ranged("header priority", h[1], 0, _UBYTE_MAX)
        if n > 2 and h[2]:
            ttl = _ranged("header ttl", h[2], 0, _UINT_MAX)
    if p:
        mid = p[0]
        if mid is not None:
            m.message_id = mid if isinstance(mid, str) else id_to_str(mid)
        if p[1] is not None:
            m.user_id = _text_field(p[1])
        if p[3] is not None:
            m.type = _text_field(p[3])
        if p[4] is not None:
            m.reply_to = _reply_to(_text_field(p[4]), s, data)
        if p[5] is not None:
            m.correlation_id = id_to_str(p[5])
        if p[6] is not None:
            m.content_type = _text_field(p[6])
        if p[8]:
            m.expiration = _ranged("absolute-expiry-time", _millis_field(p[8]), _LONG_MIN, _LONG_MAX)
        if p[9]:
            m.timestamp = _ranged("creation-time", _millis_field(p[9]), _LONG_MIN, _LONG_MAX)
        if p[10] is not None:
            m.group_id = _text_field(p[10])
        if p[11]:
            m.group_seq = _ranged("group-sequence", _millis_field(p[11]), 0, _UINT_MAX)
    if ttl and not m.expiration:
        m.expiration = now_millis() + ttl
    return m, s


def _text_field(value: Any) -> str:
    """A properties field the kernel keeps as text (subject, content-type,
    group-id, reply-to, user-id). AMQP types them (string, symbol, binary
    user-id), but a sender's encoder may put another type there; the message is
    still taken (an AMQP consumer gets its bytes unchanged) and other protocols
    see the value's text: binary as UTF-8 (U+FFFD for what is not), anything
    else as `str` gives it."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


_UBYTE_MAX: Final = 0xFF
_UINT_MAX: Final = 0xFFFFFFFF
_LONG_MIN: Final = -(1 << 63)
_LONG_MAX: Final = (1 << 63) - 1


def _ranged(name: str, value: Any, lo: int, hi: int) -> int:
    """A numeric field the kernel keeps in a fixed-width field (the stored record's
    64-bit fields, the AMQP header a consumer gets): a value of another type or
    outside `lo`..`hi` (a sender that mis-encodes it, e.g. a ulong group-sequence)
    refuses the transfer with amqp:invalid-field, before anything stores it."""
    if not isinstance(value, int) or isinstance(value, bool) or value < lo or value > hi:
        raise MessageFormatError(f"{name} {value!r} is out of range (allowed: {lo} to {hi})")
    return int(value)


def _millis_field(value: Any) -> int:
    """A timestamp or group-sequence field; one of another type than a number
    (a mis-encoded sender) reads as unset."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return 0


#: what a message that asks for scheduled delivery carries in its bytes
SCHEDULING_MARKERS = (b"AMQ_SCHEDULED_", b"x-opt-delivery-")


def apply_scheduling(m: Message, data: bytes, s: Sections) -> None:
    """Scheduled delivery as ActiveMQ and Qpid JMS / Artemis ask for it: the
    application properties `AMQ_SCHEDULED_DELAY`, `_PERIOD`, `_REPEAT` (ms, count)
    and the message annotations `x-opt-delivery-time` (epoch ms) and
    `x-opt-delivery-delay` (ms). Only called when the broker has `schedulerSupport`
    and the bytes contain one of `SCHEDULING_MARKERS`."""
    if s.application_properties is not None:
        props = m.properties
        for name, attr in (("AMQ_SCHEDULED_DELAY", "scheduled_delay"),
                           ("AMQ_SCHEDULED_PERIOD", "scheduled_period"),
                           ("AMQ_SCHEDULED_REPEAT", "scheduled_repeat")):
            value = props.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                setattr(m, attr, _scheduling(name, value))
            elif isinstance(value, str) and value.strip().isdigit():
                setattr(m, attr, _scheduling(name, int(value)))
    if s.message_annotations is not None:
        ann = decode_map_at(data, s.message_annotations)
        at = ann.get("x-opt-delivery-time")
        delay = ann.get("x-opt-delivery-delay")
        if isinstance(at, int) and not isinstance(at, bool):
            at = _ranged("x-opt-delivery-time", at, _LONG_MIN, _LONG_MAX)
            m.scheduled_delay = max(at - now_millis(), 0)
        elif isinstance(delay, int) and not isinstance(delay, bool) and delay > 0:
            m.scheduled_delay = _ranged("x-opt-delivery-delay", delay, 0, _LONG_MAX)


def _scheduling(name: str, value: int | float) -> int:
    """An AMQ_SCHEDULED_* property (ms, count) as the 64-bit field that stores it
    (ActiveMQ reads REPEAT as an int); a NaN or infinite float is out of range too."""
    hi = INT_MAX if name == "AMQ_SCHEDULED_REPEAT" else _LONG_MAX
    if isinstance(value, float) and not value <= hi:
        raise MessageFormatError(f"{name} {value!r} is out of range (allowed: 0 to {hi})")
    return _ranged(name, int(value), 0, hi)


def _relay_destination(to: Any, s: Sections, data: bytes) -> Destination:
    if not to:
        raise InvalidDestination("a message sent to the anonymous relay needs a 'to' address")
    kind = DestinationKind.QUEUE
    if s.message_annotations is not None and not str(to).startswith(_PREFIXED):
        t = decode_map_at(data, s.message_annotations).get(JMS_DEST)
        kind = _KIND_FOR_TYPE.get(t, DestinationKind.QUEUE) if isinstance(t, int) else kind
    return destination_for(str(to), None, kind)


def _reply_to(address: str, s: Sections, data: bytes) -> Destination | None:
    kind = DestinationKind.QUEUE
    if s.message_annotations is not None and not address.startswith(_PREFIXED):
        t = decode_map_at(data, s.message_annotations).get(JMS_REPLY_TO)
        kind = _KIND_FOR_TYPE.get(t, DestinationKind.QUEUE) if isinstance(t, int) else kind
    try:
        return destination_for(address, None, kind)
    except InvalidDestination:
        return None


# ---------------------------------------------------------------------------
# kernel -> AMQP
# ---------------------------------------------------------------------------


def with_delivery_count(data: bytes, delivery_count: int) -> bytes:
    """`data` with its header section replaced so it says `delivery_count` and
    first-acquirer false; only the header is re-encoded."""
    s = scan(data)
    h = list(s.header or [])
    h += [None] * (5 - len(h))
    new = enc.header_section(h[0], h[1], h[2], None, delivery_count)
    if s.header_span is None:
        return new + data
    start, end = s.header_span
    return data[:start] + new + data[end:]


#: the last bytes `carried_annotations` read, and its answer: a fan-out copies one
#: message (the same bytes object) to every target
_last_carried: tuple[bytes | None, dict[str, Any] | None] = (None, None)


def carried_annotations(data: bytes) -> dict[str, Any] | None:
    """What a copy keeps of `data`'s message annotations (`register_carry_over`);
    the answer is shared, not to be changed."""
    global _last_carried
    last_data, last = _last_carried
    if data is last_data:
        return last
    kept: dict[Any, Any] = {}
    try:
        s = scan(data)
        if s.message_annotations is not None:
            kept = {k: v for k, v in decode_map_at(data, s.message_annotations).items()
                    if not (isinstance(k, str)
                            and (k in _NOT_CARRIED or k.startswith(_NOT_CARRIED_PREFIX)))}
    except DecodeError:
        pass
    answer = {CARRIED_ANNOTATIONS: enc.encode(kept)} if kept else None
    _last_carried = (data, answer)
    return answer


register_carry_over(ENCODING, carried_annotations)


def _carried(m: Message) -> dict[Any, Any]:
    data = m.annotations.get(CARRIED_ANNOTATIONS) if m.annotations else None
    if not isinstance(data, bytes):
        return {}
    try:
        value, _ = decode(data, 0)
    except DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def from_kernel(m: Message, delivery_count: int = 0) -> bytes:
    """AMQP bytes for a message that did not arrive over AMQP (or lost its bytes)."""
    now = now_millis()
    ttl = max(m.expiration - now, 1) if m.expiration else None
    if ttl is not None and ttl > _UINT_MAX:
        ttl = None  # the header's ttl is a uint (~49.7 days); absolute-expiry-time says it
    parts = [enc.header_section(m.durable, m.priority if m.priority != DEFAULT_PRIORITY else None,
                                ttl, None, delivery_count)]
    annotations: dict[Any, Any] = _carried(m)  # the producer's own; the fields' below win
    annotations[Symbol(JMS_MSG_TYPE)] = UByte(_JMS_TYPE_FOR_BODY.get(m.body_type, 3))
    if m.destination is not None:
        annotations[Symbol(JMS_DEST)] = UByte(_DEST_TYPE[m.destination.kind])
    if m.reply_to is not None:
        annotations[Symbol(JMS_REPLY_TO)] = UByte(_DEST_TYPE[m.reply_to.kind])
    for key, value in client_annotations(m.annotations).items():  # never the internal ones
        annotations[Symbol("x-opt-" + key.replace("_", "-"))] = value
    parts.append(enc.section(MESSAGE_ANNOTATIONS, annotations))
    parts.append(enc.list_section(PROPERTIES, [
        str_to_id(m.message_id),
        m.user_id.encode() if m.user_id is not None else None,
        m.destination.key if m.destination is not None else None,
        m.type,
        m.reply_to.key if m.reply_to is not None else None,
        str_to_id(m.correlation_id),
        Symbol(m.content_type) if m.content_type else None,
        None,
        Timestamp(m.expiration) if m.expiration else None,
        Timestamp(m.timestamp) if m.timestamp else None,
        m.group_id,
        UInt(m.group_seq) if m.group_seq else None,
    ]))
    props = m.properties
    if props:
        parts.append(enc.section(APPLICATION_PROPERTIES, {str(k): v for k, v in props.items()}))
    parts.append(_body(m))
    return b"".join(parts)


def _body(m: Message) -> bytes:
    body = bytes(m.body)
    bt = m.body_type
    if bt == BodyType.TEXT:
        if not body.isascii():
            body = _utf8(body)
        n = len(body)
        head = bytes((0xA1, n)) if n < 256 else b"\xb1" + n.to_bytes(4, "big")
        return b"\x00\x53\x77" + head + body
    if bt == BodyType.EMPTY:
        return b"\x00\x53\x77\x40"
    if bt == BodyType.AMQP_VALUE:
        return enc.section(0x77, RawValue(body))
    if bt == BodyType.AMQP_SEQUENCE:
        return body
    return enc.section(0x75, body)


def _utf8(body: bytes) -> bytes:
    """A text body as valid UTF-8, which an AMQP string must be: bytes that are
    not (a STOMP SEND without content-length may carry any) decode with U+FFFD
    replacements, as ActiveMQ's STOMP text messages do."""
    try:
        body.decode("utf-8")
        return body
    except UnicodeDecodeError:
        return body.decode("utf-8", "replace").encode("utf-8")
