"""STOMP headers <-> kernel `Message` fields, as ActiveMQ maps them.

SEND -> Message: `persistent:true` (else non-persistent), `priority` (default 4),
`expires` (absolute epoch ms, 0 = never), `type`, `correlation-id`, `reply-to`,
`JMSXGroupID`/`JMSXGroupSeq` (group fields; not echoed), `AMQ_SCHEDULED_*`,
`content-type`; a body with `content-length` is bytes, one without is text
(ActiveMQ: BytesMessage vs TextMessage). Every other header becomes a string
property, which is why selectors on STOMP subscriptions convert strings.

Message -> MESSAGE: the headers that do not depend on the subscription are
rendered once per message into a block (`render_block`). A message that entered
through STOMP carries that block as its encoded form (`encoding="stomp"`), so
fan-out, redelivery and recovery never render it again; the kernel drops the
block whenever it changes a field (dead-lettering), and then it is rendered
from the fields, as for messages from other protocols.
"""

from __future__ import annotations

from typing import Any

from relaymq.dispatch.deadletter import ORIGINAL_DESTINATION, ORIGINAL_EXPIRATION
from relaymq.model.message import BodyType, Message

from .destinations import DestinationMapper, stomp_name, stomp_name_of_key
from .errors import StompError
from .frames import V11, V12, escape

ENCODING = "stomp"

#: SEND headers that are not message properties.
RESERVED = frozenset({
    "destination", "receipt", "transaction", "content-length", "content-type", "persistent",
    "priority", "expires", "type", "correlation-id", "reply-to", "JMSXGroupID", "JMSXGroupSeq",
    "AMQ_SCHEDULED_DELAY", "AMQ_SCHEDULED_PERIOD", "AMQ_SCHEDULED_REPEAT", "message-id",
    "subscription", "ack", "redelivered", "timestamp", "transformation",
})
#: MESSAGE headers the broker writes itself; a property with one of these names is not echoed.
_GENERATED = frozenset({
    "message-id", "destination", "subscription", "ack", "redelivered", "expires", "timestamp",
    "priority", "persistent", "correlation-id", "reply-to", "type", "content-type",
    "content-length", "original-destination", "originalExpiration", "receipt",
    "transaction",
})


def _int(headers: dict[str, str], name: str) -> int:
    raw = headers[name]
    try:
        return int(raw.strip())
    except ValueError:
        raise StompError(f"invalid '{name}' header", f"{name}:{raw!r} is not an integer") from None


def message_from_send(headers: dict[str, str], body: bytes, mapper: DestinationMapper,
                      message_id: str, now_ms: int) -> Message:
    """Build the kernel message for a SEND frame. `headers` (already unescaped) is
    consumed: what remains of it becomes the message's properties."""
    dest = mapper.parse(headers.pop("destination", None))
    durable = False
    priority = 4
    expiration = 0
    correlation_id = reply_to = mtype = group_id = content_type = None
    group_seq = 0
    body_type = BodyType.TEXT
    delay = period = repeat = 0
    present = RESERVED.intersection(headers)
    for name in present:
        if name == "persistent":
            durable = headers["persistent"].strip().lower() == "true"
        elif name == "priority":
            priority = min(max(_int(headers, name), 0), 9)
        elif name == "expires":
            expiration = max(_int(headers, name), 0)
        elif name == "content-length":
            body_type = BodyType.BYTES
        elif name == "content-type":
            content_type = headers[name]
        elif name == "type":
            mtype = headers[name]
        elif name == "correlation-id":
            correlation_id = headers[name]
        elif name == "reply-to":
            reply_to = mapper.parse(headers[name], "reply-to")
        elif name == "JMSXGroupID":
            group_id = headers[name]
        elif name == "JMSXGroupSeq":
            group_seq = _int(headers, name)
        elif name == "AMQ_SCHEDULED_DELAY":
            delay = _int(headers, name)
        elif name == "AMQ_SCHEDULED_PERIOD":
            period = _int(headers, name)
        elif name == "AMQ_SCHEDULED_REPEAT":
            repeat = _int(headers, name)
        del headers[name]
    m = Message(
        body, destination=dest, message_id=message_id, durable=durable, priority=priority,
        expiration=expiration, timestamp=now_ms, correlation_id=correlation_id,
        reply_to=reply_to, type=mtype, group_id=group_id, group_seq=group_seq,
        content_type=content_type, body_type=body_type, properties=headers,
    )
    if delay or period or repeat:
        m.scheduled_delay, m.scheduled_period, m.scheduled_repeat = delay, period, repeat
    m.encoded = render_block(m, V12)
    m.encoding = ENCODING
    return m


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def render_block(m: Message, version: str = V12) -> bytes:
    """The MESSAGE headers that depend only on the message, then `content-length`
    and the empty line: everything between `destination` and the body.

    Written for the common case: a message id whose only special characters are
    the colons of ActiveMQ's id shape (escaped once per id prefix), and names and
    values with nothing to escape (checked with one scan of their concatenation)."""
    if version != V12:
        return _render(m, version)
    mid = m.message_id or ""
    out = [f"message-id:{_escape_id(mid)}\n"]
    fields: list[str] = []
    if m.correlation_id is not None:
        fields += ("correlation-id", m.correlation_id)
    if m.reply_to is not None:
        fields += ("reply-to", stomp_name(m.reply_to))
    if m.type is not None:
        fields += ("type", m.type)
    if m.content_type is not None:
        fields += ("content-type", m.content_type)
    ann = m.annotations
    if ann and ann.get(ORIGINAL_DESTINATION) is not None:
        fields += ("original-destination", stomp_name_of_key(str(ann[ORIGINAL_DESTINATION])),
                   "originalExpiration", str(ann.get(ORIGINAL_EXPIRATION, 0)))
    props = m.properties
    plain = None
    if props and _GENERATED.isdisjoint(props):
        try:
            blob = "".join(props) + "".join(props.values())
        except TypeError:  # typed properties (AMQP, vm): the general path
            pass
        else:
            plain = not _special(blob)
    if fields:
        if _special("".join(fields)):
            out += [f"{escape(fields[i], V12)}:{escape(fields[i + 1], V12)}\n"
                    for i in range(0, len(fields), 2)]
        else:
            out += [f"{fields[i]}:{fields[i + 1]}\n" for i in range(0, len(fields), 2)]
    out.append(f"expires:{m.expiration}\ntimestamp:{m.timestamp}\npriority:{m.priority}\n")
    if m.durable:
        out.append("persistent:true\n")
    if plain:
        out += [f"{k}:{v}\n" for k, v in props.items()]
    elif props:
        out += _property_lines(props, V12)
    out.append(f"content-length:{len(m.body)}\n\n")
    return "".join(out).encode()


def _special(text: str) -> bool:
    return ":" in text or "\n" in text or "\\" in text or "\r" in text


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


def _property_lines(props: dict[str, Any], version: str) -> list[str]:
    lines = []
    for k, v in props.items():
        if k in _GENERATED:
            continue
        text = _text(v)
        if text is not None:
            lines.append(f"{escape(k, version)}:{escape(text, version)}\n")
    return lines


def _render(m: Message, version: str) -> bytes:
    """Any version, any message; the reference for `render_block`'s fast path."""
    def esc(text: str) -> str:
        return escape(text, version)

    parts = [f"message-id:{esc(m.message_id or '')}\n"]
    if m.correlation_id is not None:
        parts.append(f"correlation-id:{esc(m.correlation_id)}\n")
    if m.reply_to is not None:
        parts.append(f"reply-to:{esc(stomp_name(m.reply_to))}\n")
    if m.type is not None:
        parts.append(f"type:{esc(m.type)}\n")
    if m.content_type is not None:
        parts.append(f"content-type:{esc(m.content_type)}\n")
    ann = m.annotations
    if ann and ann.get(ORIGINAL_DESTINATION) is not None:
        parts.append(f"original-destination:{esc(stomp_name_of_key(str(ann[ORIGINAL_DESTINATION])))}\n")
        parts.append(f"originalExpiration:{ann.get(ORIGINAL_EXPIRATION, 0)}\n")
    parts.append(f"expires:{m.expiration}\ntimestamp:{m.timestamp}\npriority:{m.priority}\n")
    if m.durable:
        parts.append("persistent:true\n")
    props = m.properties
    if props:
        parts += _property_lines(props, version)
    parts.append(f"content-length:{len(m.body)}\n\n")
    return "".join(parts).encode()


def block_for(m: Message, version: str) -> bytes:
    """The cached block when it fits `version`, else a freshly rendered one."""
    if m.encoding == ENCODING:
        block = m.encoded
        if block is not None and (version == V12 or (version == V11 and b"\\r" not in block)):
            return block
    return render_block(m, version)
