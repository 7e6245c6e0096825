"""Kernel `Message` <-> STOMP SEND and MESSAGE frames for the outgoing client,
as ActiveMQ maps them (the server side's `mapping` module is the reference).

SEND: `persistent`, `priority`, `expires`, `correlation-id`, `reply-to`,
`type`, `content-type`, `JMSXGroupID`/`JMSXGroupSeq`, properties as string
headers. A text body without NUL goes without `content-length` (ActiveMQ makes
it a TextMessage); any other body carries `content-length`, and a text body
that needs one also says `amq-msg-type:text`. The original message id cannot
be set over STOMP (the peer assigns one). Typed properties become strings.

MESSAGE: the same headers back; `message-id`, `subscription`, `ack`,
`redelivered`, `destination` and `timestamp` are not properties.
"""

from __future__ import annotations

from typing import Any

from relaymq.model.destination import Destination, DestinationKind, InvalidDestination
from relaymq.model.message import BodyType, Message, now_millis

from relaymq_stomp.frames import V10, escape

_PREFIXES = (
    ("/queue/", DestinationKind.QUEUE), ("/topic/", DestinationKind.TOPIC),
    ("/temp-queue/", DestinationKind.TEMP_QUEUE), ("/temp-topic/", DestinationKind.TEMP_TOPIC),
    ("/remote-temp-queue/", DestinationKind.TEMP_QUEUE),
    ("/remote-temp-topic/", DestinationKind.TEMP_TOPIC),
)
_NAME_PREFIX = {
    DestinationKind.QUEUE: "/queue/", DestinationKind.TOPIC: "/topic/",
    DestinationKind.TEMP_QUEUE: "/remote-temp-queue/", DestinationKind.TEMP_TOPIC: "/remote-temp-topic/",
}
#: MESSAGE headers that are not message properties
_NOT_PROPERTIES = frozenset({
    "message-id", "subscription", "ack", "redelivered", "destination", "timestamp", "expires",
    "priority", "persistent", "correlation-id", "reply-to", "type", "content-type",
    "content-length", "JMSXGroupID", "JMSXGroupSeq", "receipt", "transaction",
    "amq-msg-type", "original-destination", "originalExpiration", "JMSXUserID",
})


def stomp_address(address: str) -> str:
    """`queue://X` -> `/queue/X`, `topic://X` -> `/topic/X`; anything else as given
    (`/queue/X`, RabbitMQ's `/exchange/...` and `/amq/queue/...`)."""
    for kernel, stomp in (("queue://", "/queue/"), ("topic://", "/topic/"),
                          ("temp-queue://", "/remote-temp-queue/"),
                          ("temp-topic://", "/remote-temp-topic/")):
        if address.startswith(kernel):
            return stomp + address[len(kernel):]
    return address


def destination_of(text: str) -> Destination:
    """The kernel destination a STOMP name stands for (a queue when it has no prefix)."""
    t = text.strip()
    for prefix, kind in _PREFIXES:
        if t.startswith(prefix):
            try:
                return Destination(kind, t[len(prefix):])
            except InvalidDestination:
                break
    try:
        return Destination.parse(stomp_address(t).lstrip("/") if "://" not in t else t)
    except InvalidDestination:
        return Destination.queue(t.strip("/").replace("/", ".") or "unknown")


def name_of(dest: Destination) -> str:
    return _NAME_PREFIX.get(dest.kind, "/queue/") + dest.name


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def send_frame(message: Message, destination: str, version: str, receipt: str | None,
               extra: dict[str, str] | None = None) -> bytes:
    """The bytes of a SEND frame for `message` to `destination`."""
    lines = ["SEND", "destination:" + escape(destination, version)]

    def add(name: str, value: str) -> None:
        lines.append(escape(name, version) + ":" + escape(value, version))

    if message.durable:
        lines.append("persistent:true")
    if message.priority != 4:
        lines.append(f"priority:{message.priority}")
    if message.expiration:
        lines.append(f"expires:{message.expiration}")
    if message.timestamp:
        lines.append(f"timestamp:{message.timestamp}")
    if message.correlation_id is not None:
        add("correlation-id", message.correlation_id)
    if message.reply_to is not None:
        add("reply-to", name_of(message.reply_to))
    if message.type is not None:
        add("type", message.type)
    if message.content_type is not None:
        add("content-type", message.content_type)
    if message.group_id is not None:
        add("JMSXGroupID", message.group_id)
        if message.group_seq:
            lines.append(f"JMSXGroupSeq:{message.group_seq}")
    for k, v in message.properties.items():
        if k in _NOT_PROPERTIES and k != "amq-msg-type":
            continue
        add(str(k), _text(v))
    for k, v in (extra or {}).items():
        add(k, v)
    if receipt is not None:
        lines.append("receipt:" + receipt)
    body = bytes(message.body)
    text = message.body_type == BodyType.TEXT
    if text and b"\x00" not in body and version != V10:
        pass  # no content-length: a text message
    else:
        if text and "amq-msg-type" not in message.properties:
            lines.append("amq-msg-type:text")
        lines.append(f"content-length:{len(body)}")
    return ("\n".join(lines) + "\n\n").encode() + body + b"\x00"


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def message_of(headers: dict[str, str], body: bytes, fallback: Destination) -> Message:
    """A kernel message for a received MESSAGE frame (headers already unescaped)."""
    dest_text = headers.get("destination")
    dest = destination_of(dest_text) if dest_text else fallback
    intended = headers.get("amq-msg-type")
    if intended is not None:
        body_type = BodyType.TEXT if intended == "text" else BodyType.BYTES
    else:
        body_type = BodyType.BYTES if "content-length" in headers else BodyType.TEXT
    m = Message(body, destination=dest, body_type=body_type,
                message_id=headers.get("message-id"),
                durable=headers.get("persistent", "").lower() == "true",
                priority=min(max(_int(headers.get("priority"), 4), 0), 9),
                expiration=max(_int(headers.get("expires")), 0),
                timestamp=_int(headers.get("timestamp")) or now_millis(),
                correlation_id=headers.get("correlation-id"),
                type=headers.get("type"), content_type=headers.get("content-type"),
                group_id=headers.get("JMSXGroupID"))
    m.group_seq = _int(headers.get("JMSXGroupSeq"))
    reply_to = headers.get("reply-to")
    if reply_to:
        m.reply_to = destination_of(reply_to)
    m.properties = {k: v for k, v in headers.items() if k not in _NOT_PROPERTIES}
    return m
