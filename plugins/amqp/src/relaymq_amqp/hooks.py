"""Always-loaded hooks of relaymq-amqp (entry point group ``relaymq.hooks``).

Stored AMQP messages keep their application properties and their body inside
the encoded bytes. The kernel recovers stored messages before it starts any connector, so
the lazy property loader must be registered when the plugin registry loads
hooks -- that is, when this module is imported -- not when the first
``amqp://`` connector is built.
"""

from __future__ import annotations

from relaymq.model.codec import register_body_reader, register_property_loader

from relaymq_amqp.mapping import ENCODING, load_properties, stored_body

register_property_loader(ENCODING, load_properties)
# The body is a section of the encoded bytes: stores keep those bytes only.
register_body_reader(ENCODING, stored_body)
