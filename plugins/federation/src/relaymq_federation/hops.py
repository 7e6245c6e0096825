"""Hop counting: the ``x-opt-amq-fed-hops`` message annotation (an AMQP int).

A federation receiver adds one before the message is routed locally (1 when
the message had none); the peer's side of an address receiver with
``max-hops=N`` passes only messages with fewer than N hops. This is Artemis'
rule and selector (``AMQPFederationPolicySupport``), so RelayMQ and Artemis
brokers count the same hops in one ring or mesh.
"""

from __future__ import annotations

import re
from typing import Any

from relaymq_amqp.encode import section
from relaymq_amqp.scanner import decode, scan
from relaymq_amqp.types import Symbol

HOPS = "x-opt-amq-fed-hops"
CORE_HOPS = "_AMQ_Fed_Hops"
_MESSAGE_ANNOTATIONS = 0x72
_BEFORE_ANNOTATIONS = (0x70, 0x71)  # header, delivery-annotations


def max_hops_selector(n: int) -> str:
    """Artemis' filter for max-hops N (``generateAddressFilter``)."""
    return (f'(("m.{HOPS}" IS NULL OR "m.{HOPS}"<{n}) AND '
            f'({CORE_HOPS} IS NULL OR {CORE_HOPS}<{n}))')


_SELECTOR = re.compile(r'^\s*\(\s*\(\s*"m\.x-opt-amq-fed-hops"\s+IS\s+NULL\s+OR\s+"m\.x-opt-amq-fed-hops"\s*<\s*'
                       r'(\d+)\s*\)\s+AND\s+\(\s*_AMQ_Fed_Hops\s+IS\s+NULL\s+OR\s+_AMQ_Fed_Hops\s*<\s*(\d+)'
                       r'\s*\)\s*\)\s*(?:AND\s+(.*))?$', re.IGNORECASE | re.DOTALL)


def split_selector(selector: str | None) -> tuple[int, str | None]:
    """(max hops, the rest of the selector) of a federation receiver's filter:
    Artemis' max-hops clause is applied natively (0: none), the rest (a binding
    or consumer filter) by the kernel's selector engine."""
    if not selector:
        return 0, None
    m = _SELECTOR.match(selector)
    if m is None:
        return 0, selector
    rest = m.group(3)
    if rest:
        rest = rest.strip()
        if rest.startswith("(") and rest.endswith(")"):
            rest = rest[1:-1]
    return int(m.group(1)), rest or None


def _annotations(data: bytes) -> tuple[dict[Any, Any], int, int]:
    """The message annotations and the byte range of their section (an empty
    range where they would go when the message has none)."""
    pos = 0
    n = len(data)
    while pos < n:
        if data[pos] != 0:
            break
        start = pos
        value, end = decode(data, pos)
        code = value.descriptor if hasattr(value, "descriptor") else None
        if code == _MESSAGE_ANNOTATIONS:
            inner = value.value
            return (dict(inner) if isinstance(inner, dict) else {}), start, end
        if code not in _BEFORE_ANNOTATIONS:
            return {}, start, start
        pos = end
    return {}, pos, pos


def _exact_bytes(data: bytes | bytearray | memoryview) -> bytes:
    """`data` as ``bytes``: the AMQP scanner is compiled for ``bytes`` only (its
    per-message fast path), while proton's ``Message.encode()`` gives a ``bytearray``.
    Free for ``bytes``, which is what the broker's own AMQP engine hands over."""
    return data if type(data) is bytes else bytes(data)


def hops_of(data: bytes | bytearray | memoryview) -> int:
    """The hop count a message carries (0: none)."""
    data = _exact_bytes(data)
    s = scan(data)
    if s.message_annotations is None:
        return 0
    value, _ = decode(data, s.message_annotations[0])
    if not isinstance(value, dict):
        return 0
    hops = value.get(HOPS)
    return int(hops) if isinstance(hops, int) else 0


def add_hop(data: bytes | bytearray | memoryview) -> tuple[bytes, int]:
    """The message with its hop count raised by one, and the new count."""
    data = _exact_bytes(data)
    annotations, start, end = _annotations(data)
    before = annotations.get(HOPS)
    hops = (int(before) if isinstance(before, int) else 0) + 1
    annotations[Symbol(HOPS)] = hops
    return data[:start] + section(_MESSAGE_ANNOTATIONS, annotations) + data[end:], hops
