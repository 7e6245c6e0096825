"""Always-loaded hooks of relaymq-amqp (entry point group ``relaymq.hooks``).

Stored AMQP messages keep their application properties and their body inside
the encoded bytes. The kernel recovers stored messages before it starts any connector, so
the lazy property loader must be registered when the plugin registry loads
hooks -- that is, when this module is imported -- not when the first
``amqp://`` connector is built.
"""

from __future__ import annotations

from typing import Any

from relaymq.model.body_views import register_body_decoder
from relaymq.model.codec import register_body_reader, register_property_loader
from relaymq.model.message import BodyType

from relaymq_amqp.mapping import ENCODING, load_properties, stored_body
from relaymq_amqp.scanner import decode

register_property_loader(ENCODING, load_properties)
# The body is a section of the encoded bytes: stores keep those bytes only.
register_body_reader(ENCODING, stored_body)


def _value(body: bytes) -> Any:
    """An amqp-value body: the one encoded value."""
    return decode(body)[0]


def _sequence(body: bytes) -> list[Any]:
    """An amqp-sequence body: its sections' lists, one after the other."""
    out: list[Any] = []
    pos = 0
    while pos < len(body):
        section, pos = decode(body, pos)
        out.extend(getattr(section, "value", section))
    return out


# Browsing (management, the console) shows maps, lists and numbers decoded.
register_body_decoder(BodyType.AMQP_VALUE, _value)
register_body_decoder(BodyType.AMQP_SEQUENCE, _sequence)
