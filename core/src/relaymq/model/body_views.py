"""Readable values of bodies that are encoded values (AMQP maps, lists, numbers):
what management's browsing and the console show instead of their bytes.

A transport registers a decoder per body type (`relaymq.model.message.BodyType`)
when it is loaded (relaymq-amqp: ``amqp-value`` and ``amqp-sequence``); the
kernel never decodes a body on the message path, only when somebody looks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: body bytes -> the value they encode (raises ValueError when they are not one)
BodyDecoder = Callable[[bytes], Any]
_decoders: dict[str, BodyDecoder] = {}


def register_body_decoder(body_type: str, decoder: BodyDecoder) -> None:
    """Decode bodies of `body_type` with `decoder` for display."""
    _decoders[body_type] = decoder


def decoded_body(body_type: str, body: bytes) -> tuple[bool, Any]:
    """`(True, value)` for a body a registered decoder reads; `(False, None)` when
    none is registered for `body_type` or the bytes do not decode."""
    decoder = _decoders.get(body_type)
    if decoder is None:
        return False, None
    try:
        return True, decoder(body)
    except ValueError:
        return False, None
