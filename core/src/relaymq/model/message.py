"""The kernel's message: header fields, properties and a body, encoded form kept.

A transport builds a `Message` from what it received and may attach its encoded
bytes (`encoded`, `encoding`). A transport of the same protocol forwards those
bytes unchanged; another protocol converts from the fields once, at its edge.
Application properties may be parsed lazily: a transport passes a `loader` that
fills them on first use (selectors, routing), so a message that nobody inspects
is never decoded.

Per-delivery state (redelivered flag, delivery count) is not here: it belongs
to the queue entry, since one message sits on many subscriptions at once.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from relaymq.model.destination import Destination
from relaymq.model.jtypes import Int32

PropertyLoader = Callable[["Message"], dict[str, Any]]

DEFAULT_PRIORITY: Final = 4


class BodyType:
    """How the body bytes are meant to be read (JMS message kinds, AMQP sections)."""

    BYTES: Final = "bytes"
    TEXT: Final = "text"  # UTF-8
    MAP: Final = "map"
    STREAM: Final = "stream"
    OBJECT: Final = "object"  # opaque to RelayMQ; never deserialized
    AMQP_VALUE: Final = "amqp-value"
    AMQP_SEQUENCE: Final = "amqp-sequence"
    EMPTY: Final = "empty"


#: annotations the broker keeps for itself, stored with a message but never
#: rendered by a transport to a client or another broker: a mirror target's
#: internal id of the message at its origin broker (``mirror_id``, also read from
#: stores written before it was registered here) and a scheduled job's duplicate
#: id. A plugin adds its own with `internal_annotation`.
INTERNAL_ANNOTATIONS: set[str] = {"mirror_id", "relaymq_scheduled_duplicate_id"}


def internal_annotation(name: str) -> str:
    """Register `name` as an internal annotation (see `INTERNAL_ANNOTATIONS`)."""
    INTERNAL_ANNOTATIONS.add(name)
    return name


#: encoding -> what of a message's encoded bytes no kernel field holds and a copy
#: must keep when it drops the bytes (`Message.copy`), as annotations: AMQP's
#: message annotations of the producer's own, on a dead-letter or scheduled copy.
#: A transport registers its own with `register_carry_over`.
CarryOver = Callable[[bytes], dict[str, Any] | None]
CARRY_OVER: dict[str, CarryOver] = {}


def register_carry_over(encoding: str, carry: CarryOver) -> None:
    CARRY_OVER[encoding] = carry


def client_annotations(annotations: dict[str, Any] | None) -> dict[str, Any]:
    """`annotations` without the internal ones: what a transport renders."""
    if not annotations:
        return {}
    internal = INTERNAL_ANNOTATIONS
    if internal.isdisjoint(annotations):
        return annotations
    return {k: v for k, v in annotations.items() if k not in internal}


class Message:
    """A message as the kernel routes it. Cheap to create; fields are plain slots."""

    __slots__ = (
        "message_id", "destination", "durable", "priority", "expiration", "timestamp",
        "correlation_id", "reply_to", "type", "group_id", "group_seq", "user_id",
        "content_type", "body", "body_type", "_properties", "_loader", "annotations",
        "encoded", "encoding", "origin", "producer_id", "scheduled_delay",
        "scheduled_period", "scheduled_repeat", "_size",
    )

    def __init__(
        self,
        body: bytes = b"",
        *,
        destination: Destination | None = None,
        message_id: str | None = None,
        durable: bool = False,
        priority: int = DEFAULT_PRIORITY,
        expiration: int = 0,
        timestamp: int = 0,
        correlation_id: str | None = None,
        reply_to: Destination | None = None,
        type: str | None = None,
        group_id: str | None = None,
        group_seq: int = 0,
        user_id: str | None = None,
        content_type: str | None = None,
        body_type: str = BodyType.BYTES,
        properties: dict[str, Any] | None = None,
        loader: PropertyLoader | None = None,
        annotations: dict[str, Any] | None = None,
        encoded: bytes | None = None,
        encoding: str | None = None,
        origin: str | None = None,
        producer_id: str | None = None,
    ) -> None:
        self.body = body
        self.destination = destination
        self.message_id = message_id
        self.durable = durable
        self.priority = priority
        self.expiration = expiration  # absolute epoch ms; 0 = never
        self.timestamp = timestamp  # epoch ms when the broker (or producer) stamped it
        self.correlation_id = correlation_id
        self.reply_to = reply_to
        self.type = type
        self.group_id = group_id
        self.group_seq = group_seq
        self.user_id = user_id
        self.content_type = content_type
        self.body_type = body_type
        self._properties = properties
        self._loader = loader
        self.annotations = annotations
        self.encoded = encoded
        self.encoding = encoding
        self.origin = origin  # broker id the message entered RelayMQ at (mirror/federation)
        self.producer_id = producer_id
        self.scheduled_delay = 0
        self.scheduled_period = 0
        self.scheduled_repeat = 0
        self._size = 0

    @property
    def properties(self) -> dict[str, Any]:
        """Application properties, parsed on first use when a loader was given."""
        props = self._properties
        if props is None:
            loader = self._loader
            props = loader(self) if loader is not None else {}
            self._properties = props
            self._loader = None
        return props

    @properties.setter
    def properties(self, value: dict[str, Any]) -> None:
        self._properties = value
        self._loader = None

    def peek_property(self, name: str, marker: bytes) -> Any:
        """The property `name` or None, without parsing lazily loaded properties
        whose encoded bytes do not contain `marker` (the name as it is encoded):
        what the routing path asks of every message (`_AMQ_DUPL_ID`). Properties
        parsed here are not kept: they stay lazy, so the store keeps them only in
        the encoded form (a loaded map is stored again as JSON next to it)."""
        props = self._properties
        if props is None:
            loader = self._loader
            if loader is None:
                return None
            encoded = self.encoded
            if encoded is not None:
                # Look only before the body when the encoded form ends with it (AMQP:
                # properties come first); scanning a whole 1 KiB message for the
                # marker costs about a microsecond, comparing the tail far less.
                end = len(encoded)
                body = self.body
                if body is not None and 0 < len(body) < end and encoded.endswith(body):
                    end -= len(body)
                if encoded.find(marker, 0, end) < 0:
                    return None
                return loader(self).get(name)
            props = self.properties
        return props.get(name)

    @property
    def size(self) -> int:
        """Approximate memory footprint used for usage limits (computed once:
        a message is not changed after it is sent; `copy` makes a new one)."""
        n = self._size
        if not n:
            n = len(self.body) + 200
            if self.encoded is not None and self.encoded is not self.body:
                n += len(self.encoded)
            self._size = n
        return n

    def is_expired(self, now_ms: int | None = None) -> bool:
        exp = self.expiration
        return exp > 0 and exp <= (now_ms if now_ms is not None else now_millis())

    def copy(self, **changes: Any) -> Message:
        """A copy with `changes` applied. Changing any field but the destination or
        origin drops the encoded form, because the bytes would no longer say what
        the fields say. (Written out slot by slot: fan-outs copy per target.)"""
        m = _new(Message)
        m.message_id = self.message_id
        m.destination = self.destination
        m.durable = self.durable
        m.priority = self.priority
        m.expiration = self.expiration
        m.timestamp = self.timestamp
        m.correlation_id = self.correlation_id
        m.reply_to = self.reply_to
        m.type = self.type
        m.group_id = self.group_id
        m.group_seq = self.group_seq
        m.user_id = self.user_id
        m.content_type = self.content_type
        m.body = self.body
        m.body_type = self.body_type
        props = self._properties
        m._properties = dict(props) if props is not None else None
        m._loader = self._loader
        m.annotations = self.annotations
        m.encoded = self.encoded
        m.encoding = self.encoding
        m.origin = self.origin
        m.producer_id = self.producer_id
        m.scheduled_delay = self.scheduled_delay
        m.scheduled_period = self.scheduled_period
        m.scheduled_repeat = self.scheduled_repeat
        m._size = 0
        if changes:
            new_props = changes.pop("properties", None)
            for k, v in changes.items():
                setattr(m, k, v)
            if new_props is not None:
                m.properties = new_props
            if new_props is not None or any(k not in _ENCODING_NEUTRAL for k in changes):
                if m._properties is None and m._loader is not None:
                    # a lazy loader reads the encoded bytes dropped here: load first
                    m._properties = dict(self.properties)
                    m._loader = None
                encoded = self.encoded
                if encoded is not None:
                    carry = CARRY_OVER.get(self.encoding or "")
                    kept = carry(encoded) if carry is not None else None
                    if kept:  # what `changes` set wins
                        m.annotations = {**kept, **(m.annotations or {})}
                m.encoded = None
                m.encoding = None
        return m

    def __repr__(self) -> str:
        return (
            f"Message(id={self.message_id!r}, dest={self.destination}, "
            f"durable={self.durable}, body={self.body[:32]!r})"
        )


# every attribute a Message carries: the slots when interpreted, mypyc's list when compiled
def _message_fields() -> tuple[str, ...]:
    names: Any = getattr(Message, "__slots__", None)
    return tuple(names if names else vars(Message)["__mypyc_attrs__"])


MESSAGE_FIELDS = _message_fields()
_new: Final = Message.__new__  # the class's own allocator: object.__new__ refuses a compiled class
_ENCODING_NEUTRAL: Final = frozenset({"destination", "origin", "producer_id"})


def wire_message(body: bytes, destination: Destination | None, body_type: str,
                 encoded: bytes | None, encoding: str | None,
                 properties: dict[str, Any] | None = None,
                 loader: PropertyLoader | None = None) -> Message:
    """``Message(body, destination=..., body_type=..., encoded=..., encoding=...)``
    for a transport's per-message path: positional arguments, every other field
    at its default. Keyword arguments cost more than the message's own fields,
    so this makes a received message in a third of the time."""
    m = _new(Message)
    m.body = body
    m.destination = destination
    m.message_id = None
    m.durable = False
    m.priority = DEFAULT_PRIORITY
    m.expiration = 0
    m.timestamp = 0
    m.correlation_id = None
    m.reply_to = None
    m.type = None
    m.group_id = None
    m.group_seq = 0
    m.user_id = None
    m.content_type = None
    m.body_type = body_type
    m._properties = properties
    m._loader = loader
    m.annotations = None
    m.encoded = encoded
    m.encoding = encoding
    m.origin = None
    m.producer_id = None
    m.scheduled_delay = 0
    m.scheduled_period = 0
    m.scheduled_repeat = 0
    m._size = 0
    return m


def now_millis() -> int:
    return time.time_ns() // 1_000_000


class MessageIdGenerator:
    """ActiveMQ-shaped ids: `ID:<host>-<port>-<start>-<n>:<conn>:-1:<producer>:<seq>`.

    Ids stay stable across redelivery, dead-lettering and restart because they are
    assigned once, on arrival, and stored with the message.
    """

    def __init__(self, port: int = 0) -> None:
        host = socket.gethostname().split(".")[0] or "relaymq"
        self._prefix = f"ID:{host}-{port or os.getpid()}-{int(time.time() * 1000)}-1"
        self._conn = itertools.count(1)

    def connection_prefix(self) -> str:
        """A prefix for one connection; producers append `:-1:<producer>:<seq>`."""
        return f"{self._prefix}:{next(self._conn)}"


HEADER_FIELDS: Mapping[str, str] = {
    "JMSMessageID": "message_id",
    "JMSPriority": "priority",
    "JMSTimestamp": "timestamp",
    "JMSCorrelationID": "correlation_id",
    "JMSType": "type",
    "JMSXGroupID": "group_id",
    "JMSXGroupSeq": "group_seq",
    "JMSXUserID": "user_id",
    "JMSExpiration": "expiration",
}


_INT_HEADERS: Final = frozenset({"JMSPriority", "JMSXGroupSeq"})


class SelectorView:
    """A read-only mapping view of a message for selector evaluation.

    Resolves JMS header identifiers to message fields and everything else to
    application properties, without building a dict per message.
    """

    __slots__ = ("_m", "_count")

    def __init__(self, message: Message, delivery_count: int = 0) -> None:
        self._m = message
        self._count = delivery_count

    def get(self, name: str, default: Any = None) -> Any:
        attr = HEADER_FIELDS.get(name)
        m = self._m
        if attr is not None:
            value = getattr(m, attr)
            if value is None:
                return default
            # Java ints in JMS (the rest are strings or longs); selectors do int arithmetic on them
            return Int32(value) if name in _INT_HEADERS else value
        if name == "JMSDeliveryMode":
            return "PERSISTENT" if m.durable else "NON_PERSISTENT"
        if name == "JMSRedelivered":
            return self._count > 0
        if name == "JMSXDeliveryCount":
            return Int32(self._count + 1)
        if name == "JMSDestination":
            return str(m.destination.name) if m.destination else default
        if name == "JMSReplyTo":
            return str(m.reply_to) if m.reply_to else default
        return m.properties.get(name, default)

    def __getitem__(self, name: str) -> Any:
        value = self.get(name, _MISSING)
        if value is _MISSING:
            raise KeyError(name)
        return value


_MISSING: Final = object()
