"""STOMP headers <-> kernel `Message` fields, as ActiveMQ maps them.

SEND -> Message: `persistent:true` (else non-persistent), `priority` (default 4),
`expires` (absolute epoch ms, 0 = never), `type`, `correlation-id`, `reply-to`,
`JMSXGroupID`/`JMSXGroupSeq` (group fields, echoed on MESSAGE), `AMQ_SCHEDULED_*`,
`content-type`, `timestamp` (JMSTimestamp; the broker's clock without it); a
body with `content-length` is bytes, one without is text (ActiveMQ:
BytesMessage vs TextMessage) unless `amq-msg-type:text|bytes` says which (that
header stays a property, as in ActiveMQ). `JMSXUserID` is dropped (a client
cannot claim a user). Every other header becomes a string property, which is
why selectors on STOMP subscriptions convert strings; the ones named like a
header the broker writes on a dead-lettered copy (`original-destination`,
`originalExpiration`, `dlqDeliveryFailureCause`) are not echoed on MESSAGE.

Message -> MESSAGE: the headers that do not depend on the subscription are
rendered once per message into a block (`render_block`). A message that entered
through STOMP carries that block as its encoded form (`encoding="stomp"`), so
fan-out, redelivery and recovery never render it again; the kernel drops the
block whenever it changes a field (dead-lettering), and then it is rendered
from the fields, as for messages from other protocols.
"""

from __future__ import annotations

from typing import Any, Final

from relaymq.dispatch.deadletter import (
    DLQ_DELIVERY_FAILURE_CAUSE,
    ORIGINAL_DESTINATION,
    ORIGINAL_EXPIRATION,
)
from relaymq.model.message import BodyType, Message, wire_message

from .destinations import DestinationMapper, stomp_name, stomp_name_of_key
from .errors import StompError
from .frames import V11, V12, escape
from .java_text import java_string

ENCODING: Final = "stomp"

#: SEND headers that are not message properties.
RESERVED: Final = frozenset({
    "destination", "receipt", "transaction", "content-length", "content-type", "persistent",
    "priority", "expires", "type", "correlation-id", "reply-to", "JMSXGroupID", "JMSXGroupSeq",
    "AMQ_SCHEDULED_DELAY", "AMQ_SCHEDULED_PERIOD", "AMQ_SCHEDULED_REPEAT", "message-id",
    "subscription", "ack", "redelivered", "timestamp", "transformation", "JMSXUserID",
})
#: ActiveMQ's STOMP header that chooses the JMS message type whatever `content-length` says.
AMQ_MSG_TYPE: Final = "amq-msg-type"
#: the MESSAGE header (a property in ActiveMQ) saying why a message was dead-lettered
DLQ_CAUSE_HEADER: Final = "dlqDeliveryFailureCause"
#: MESSAGE headers the broker writes itself; a property with one of these names is not echoed.
_GENERATED: Final = frozenset({
    "message-id", "destination", "subscription", "ack", "redelivered", "expires", "timestamp",
    "priority", "persistent", "correlation-id", "reply-to", "type", "content-type",
    "content-length", "original-destination", "originalExpiration", "receipt",
    "transaction", "JMSXUserID", "JMSXGroupID", "JMSXGroupSeq", DLQ_CAUSE_HEADER,
})
#: the generated headers a SEND does not consume: a client's header of one of these names
#: stays a property but is never echoed, as if the broker had set it (dead-lettering does)
_NOT_ECHOED: Final = _GENERATED - RESERVED


#: Java's int and long ranges: what ActiveMQ parses these headers as (Integer.parseInt,
#: Long.parseLong) and what the stored record keeps them in (64-bit fields)
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
#: the allowed range of each numeric SEND header; one outside it is refused with an ERROR
#: (ActiveMQ's NumberFormatException) before the message exists, so it never reaches a store
#: write. JMSXGroupSeq is an int that an AMQP consumer gets as a uint group-sequence: 0 up.
HEADER_RANGES: dict[str, tuple[int, int]] = {
    "priority": (INT_MIN, INT_MAX),
    "expires": (LONG_MIN, LONG_MAX),
    "timestamp": (LONG_MIN, LONG_MAX),
    "JMSXGroupSeq": (0, INT_MAX),
    "AMQ_SCHEDULED_DELAY": (LONG_MIN, LONG_MAX),
    "AMQ_SCHEDULED_PERIOD": (LONG_MIN, LONG_MAX),
    "AMQ_SCHEDULED_REPEAT": (INT_MIN, INT_MAX),
}


def _int(name: str, raw: str) -> int:
    lo, hi = HEADER_RANGES[name]
    try:
        value = int(raw)
    except ValueError:
        raise StompError(f"invalid '{name}' header",
                         f"{name}:{raw!r} is not an integer (allowed: {lo} to {hi})") from None
    if value < lo or value > hi:
        raise StompError(f"invalid '{name}' header: out of range, allowed {lo} to {hi}",
                         f"{name}:{raw!r} is out of range (allowed: {lo} to {hi})")
    return value


class SendCache:
    """The last SEND's headers and what they made, per connection: a producer
    usually repeats its headers, and then only the id, the timestamp and the
    body differ. Used for clean frames whose block needed no escaping."""

    __slots__ = ("headers", "fields", "head", "tail")

    def __init__(self) -> None:
        self.headers: dict[str, str] | None = None
        self.fields: tuple[Any, ...] = ()
        self.head = ""  # the block's lines between message-id and timestamp
        self.tail = ""  # and between timestamp and content-length


def stamp_user(m: Message, user: str) -> None:
    """`populateJMSXUserID`: the message carries its sender's user, also on the
    MESSAGE frames rendered from its block (a SEND's own JMSXUserID is dropped)."""
    m.user_id = user
    m.encoded = render_block(m, V12, trusted=True)


def message_from_send(headers: dict[str, str], body: bytes, mapper: DestinationMapper,
                      message_id: str, now_ms: int, escaped_id: str | None = None,
                      clean: bool = False, cache: SendCache | None = None) -> Message:
    """Build the kernel message for a SEND frame, with its MESSAGE header block.

    `headers` (already unescaped) is consumed: what remains of it becomes the
    message's properties. This is the per-message path of every STOMP producer,
    so it sets fields only for headers that are present and renders the block
    from what it already has in hand (`render_block` is the general form).
    `clean` promises no backslash, CR or LF in any name or value (`Frame.escaped`
    is False), which leaves colons as the only thing that may need escaping.
    With a `cache`, a SEND whose headers equal the previous one's reuses what
    they made."""
    if cache is not None and clean and escaped_id is not None and headers == cache.headers:
        dest = mapper.parse(headers.pop("destination", None))
        (body_type, content_type, durable, priority, expiration, correlation_id, type_,
         reply_to, props) = cache.fields
        m = wire_message(body, dest, body_type, None, ENCODING, dict(props))
        m.message_id = message_id
        m.timestamp = now_ms
        m.content_type = content_type
        m.durable = durable
        m.priority = priority
        m.expiration = expiration
        m.correlation_id = correlation_id
        m.type = type_
        m.reply_to = reply_to
        m.encoded = (f"message-id:{escaped_id}\n{cache.head}timestamp:{now_ms}\n{cache.tail}"
                     f"content-length:{len(body)}\n\n").encode()
        return m
    before = dict(headers) if cache is not None and clean else None
    dest = mapper.parse(headers.pop("destination", None))
    m = wire_message(body, dest, BodyType.TEXT, None, ENCODING, headers)
    m.message_id = message_id
    m.timestamp = now_ms
    text = ""  # the header lines kept on MESSAGE, each ending in a newline
    nlines = 0
    present = RESERVED.intersection(headers)
    for name in present:
        value = headers.pop(name)
        if name == "content-length":
            m.body_type = BodyType.BYTES
        elif name == "content-type":
            m.content_type = value
            text += "content-type:" + value + "\n"
            nlines += 1
        elif name == "persistent":
            m.durable = value.strip().lower() == "true"
        elif name == "priority":
            m.priority = min(max(_int(name, value), 0), 9)
        elif name == "expires":
            m.expiration = max(_int(name, value), 0)
        elif name == "correlation-id":
            m.correlation_id = value
            text += "correlation-id:" + value + "\n"
            nlines += 1
        elif name == "type":
            m.type = value
            text += "type:" + value + "\n"
            nlines += 1
        elif name == "reply-to":
            m.reply_to = mapper.parse(value, "reply-to")
            text += "reply-to:" + stomp_name(m.reply_to) + "\n"
            nlines += 1
        elif name == "JMSXGroupID":
            m.group_id = value
            text += "JMSXGroupID:" + value + "\n"
            nlines += 1
        elif name == "JMSXGroupSeq":
            m.group_seq = _int(name, value)
            if m.group_seq:
                text += "JMSXGroupSeq:" + str(m.group_seq) + "\n"
                nlines += 1
        elif name == "AMQ_SCHEDULED_DELAY":
            m.scheduled_delay = _int(name, value)
        elif name == "AMQ_SCHEDULED_PERIOD":
            m.scheduled_period = _int(name, value)
        elif name == "AMQ_SCHEDULED_REPEAT":
            m.scheduled_repeat = _int(name, value)
        elif name == "timestamp":
            m.timestamp = max(_int(name, value), 0)
        # receipt, transaction, message-id, subscription, ack, JMSXUserID, ...: not message data
    if headers:
        intended = headers.get(AMQ_MSG_TYPE)
        if intended is not None:
            m.body_type = _intended_body_type(intended)
    if headers and not _NOT_ECHOED.isdisjoint(headers):
        for name, value in headers.items():
            if name not in _NOT_ECHOED:
                text += name + ":" + value + "\n"
                nlines += 1
    else:
        for name, value in headers.items():  # the properties (a loop is the cheapest join)
            text += name + ":" + value + "\n"
        nlines += len(headers)
    durable = "persistent:true\n" if m.durable else ""
    eid = escaped_id or _escape_id(message_id)
    if nlines and (text.count(":") != nlines or "\x00" in text or not clean and (
            text.count("\n") != nlines or "\\" in text or "\r" in text)):
        # something to escape, or a NUL (it would end the MESSAGE frame; the
        # property keeps it for other protocols, the header shows U+FFFD)
        m.encoded = render_block(m, V12, trusted=True)
        return m
    m.encoded = (f"message-id:{eid}\n{text}expires:{m.expiration}\ntimestamp:{m.timestamp}\n"
                 f"priority:{m.priority}\n{durable}content-length:{len(body)}\n\n").encode()
    if cache is not None:
        if before is not None and m.group_id is None and not m.group_seq and not (
                m.scheduled_delay or m.scheduled_period or m.scheduled_repeat) and (
                "timestamp" not in present):
            cache.headers = before
            cache.fields = (m.body_type, m.content_type, m.durable, m.priority, m.expiration,
                            m.correlation_id, m.type, m.reply_to, dict(headers))
            cache.head = f"{text}expires:{m.expiration}\n"
            cache.tail = f"priority:{m.priority}\n{durable}"
        else:
            cache.headers = None
    return m


def _intended_body_type(intended: str) -> str:
    kind = intended.lower()
    if kind == "text":
        return BodyType.TEXT
    if kind == "bytes":
        return BodyType.BYTES
    raise StompError(f"Unsupported message type '{intended}'",
                     f"{AMQ_MSG_TYPE} is 'text' or 'bytes'")


def _text(value: Any) -> str | None:
    """A property value as the text of a MESSAGE header (ActiveMQ writes a
    non-string property as its `toString()`): booleans `true`/`false`, binary
    as hex, integers and uuids as `str` gives them, floats, lists and maps as Java
    does (`java_text`); None means no header. A NUL (which ends a STOMP frame and
    has no escape) becomes U+FFFD."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        return "true" if value else "false"
    elif value is None:
        return None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    elif isinstance(value, (float, list, tuple, dict)):
        text = java_string(value)
    else:
        text = str(value)
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def render_block(m: Message, version: str = V12, trusted: bool = False) -> bytes:
    """The MESSAGE headers that depend only on the message, then `content-length`
    and the empty line: everything between `destination` and the body.

    Written for the common case (`_render` is the general form and the reference):
    a message id whose only special characters are the colons of ActiveMQ's id
    shape (escaped once per id prefix), string properties, and names and values
    with nothing to escape, which one count of colons and newlines over the
    joined lines proves. `trusted` says the properties cannot collide with the
    headers written here (they came from a SEND, which consumed those, all but
    `_NOT_ECHOED`)."""
    if version != V12:
        return _render(m, version)
    fields: list[str] = []
    if m.correlation_id is not None:
        fields.append("correlation-id:" + m.correlation_id)
    if m.reply_to is not None:
        fields.append("reply-to:" + stomp_name(m.reply_to))
    if m.type is not None:
        fields.append("type:" + m.type)
    if m.content_type is not None:
        fields.append("content-type:" + m.content_type)
    if m.user_id:
        fields.append("JMSXUserID:" + m.user_id)
    if m.group_id is not None:
        fields.append("JMSXGroupID:" + m.group_id)
    if m.group_seq:
        fields.append(f"JMSXGroupSeq:{m.group_seq}")
    ann = m.annotations
    if ann and ann.get(ORIGINAL_DESTINATION) is not None:
        trusted = False
        fields.append("original-destination:" + stomp_name_of_key(str(ann[ORIGINAL_DESTINATION])))
        fields.append(f"originalExpiration:{ann.get(ORIGINAL_EXPIRATION, 0)}")
        cause = ann.get(DLQ_DELIVERY_FAILURE_CAUSE)
        if cause is not None:
            fields.append(f"{DLQ_CAUSE_HEADER}:{cause}")
    nlines = len(fields)
    props = m.properties
    if props:
        if not (_NOT_ECHOED if trusted else _GENERATED).isdisjoint(props):
            return _render(m, V12)
        try:
            fields.append("\n".join(map(":".join, props.items())))
        except TypeError:  # typed properties (AMQP, vm): the general path
            return _render(m, V12)
        nlines += len(props)
    durable = "persistent:true\n" if m.durable else ""
    mid = m.message_id or ""
    if "\x00" in mid:
        return _render(m, V12)
    if nlines:
        text = "\n".join(fields)
        if text.count(":") != nlines or (
                text.count("\n") != nlines - 1 or "\\" in text or "\r" in text
                or "\x00" in text):
            return _render(m, V12)
        return (f"message-id:{_escape_id(mid)}\n{text}\nexpires:{m.expiration}\n"
                f"timestamp:{m.timestamp}\npriority:{m.priority}\n{durable}"
                f"content-length:{len(m.body)}\n\n").encode()
    return (f"message-id:{_escape_id(mid)}\nexpires:{m.expiration}\n"
            f"timestamp:{m.timestamp}\npriority:{m.priority}\n{durable}"
            f"content-length:{len(m.body)}\n\n").encode()


_escaped_ids: dict[str, str] = {}


def _escape_id(mid: str) -> str:
    """`ID:host-1-2-1:3:-1:1:42` -> `ID\\chost-1-2-1\\c3\\c-1\\c1\\c42`, the prefix cached."""
    head = mid.rstrip("0123456789")
    esc = _escaped_ids.get(head)
    if esc is None:
        if len(_escaped_ids) > 4096:
            _escaped_ids.clear()
        esc = _escaped_ids[head] = escape(head, V12)
    return esc + mid[len(head):]


def _property_lines(props: dict[Any, Any], version: str) -> list[str]:
    # dict[Any, Any]: the compiled build would check each key is a str (one from a
    # raw AMQP sender may not be)
    lines = []
    for k, v in props.items():
        name = _text(k)  # a non-string key (AMQP allows none, a raw sender may) as text
        if not name or name in _GENERATED:
            continue
        text = _text(v)
        if text is not None:
            lines.append(f"{escape(name, version)}:{escape(text, version)}\n")
    return lines


def _render(m: Message, version: str) -> bytes:
    """Any version, any message; the reference for `render_block`'s fast path."""
    def esc(text: Any) -> str:
        return escape(_text(text) or "", version)

    parts = [f"message-id:{esc(m.message_id or '')}\n"]
    if m.correlation_id is not None:
        parts.append(f"correlation-id:{esc(m.correlation_id)}\n")
    if m.reply_to is not None:
        parts.append(f"reply-to:{esc(stomp_name(m.reply_to))}\n")
    if m.type is not None:
        parts.append(f"type:{esc(m.type)}\n")
    if m.content_type is not None:
        parts.append(f"content-type:{esc(m.content_type)}\n")
    if m.user_id:
        parts.append(f"JMSXUserID:{esc(m.user_id)}\n")
    if m.group_id is not None:
        parts.append(f"JMSXGroupID:{esc(m.group_id)}\n")
    if m.group_seq:
        parts.append(f"JMSXGroupSeq:{m.group_seq}\n")
    ann = m.annotations
    if ann and ann.get(ORIGINAL_DESTINATION) is not None:
        parts.append(f"original-destination:{esc(stomp_name_of_key(str(ann[ORIGINAL_DESTINATION])))}\n")
        parts.append(f"originalExpiration:{ann.get(ORIGINAL_EXPIRATION, 0)}\n")
        cause = ann.get(DLQ_DELIVERY_FAILURE_CAUSE)
        if cause is not None:
            parts.append(f"{DLQ_CAUSE_HEADER}:{esc(str(cause))}\n")
    props = m.properties
    if props:
        parts += _property_lines(props, version)
    parts.append(f"expires:{m.expiration}\ntimestamp:{m.timestamp}\npriority:{m.priority}\n")
    if m.durable:
        parts.append("persistent:true\n")
    parts.append(f"content-length:{len(m.body)}\n\n")
    return "".join(parts).encode()


def block_for(m: Message, version: str) -> bytes:
    """The cached block when it fits `version`, else a freshly rendered one."""
    if m.encoding == ENCODING:
        block = m.encoded
        if block is not None and (version == V12 or (version == V11 and b"\\r" not in block)):
            return block
    return render_block(m, version)
