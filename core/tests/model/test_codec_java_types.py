"""The stored form keeps Java widths of properties: int vs long, float vs double."""

from __future__ import annotations

import struct

from relaymq.model.codec import decode_message, encode_message
from relaymq.model.jtypes import Float32, Int32
from relaymq.model.message import Message
from relaymq.selector import Selector


def test_int_and_float_properties_survive_the_store_codec() -> None:
    f = Float32(struct.unpack("<f", struct.pack("<f", 1.1))[0])
    m = Message(b"x", properties={"i": Int32(2147483647), "l": 2147483647, "f": f, "d": 1.1,
                                  "s": "7", "b": True})
    back = decode_message(encode_message(m)).properties
    assert type(back["i"]) is Int32 and back["i"] == 2147483647
    assert type(back["l"]) is int
    assert type(back["f"]) is Float32 and back["f"] == f
    assert type(back["d"]) is float and back["s"] == "7" and back["b"] is True
    # what a selector sees after a restart is what it saw before
    sel = Selector.compile("i + 1 < 0 AND l + 1 > 0 AND f = 1.1F AND d = 1.1")
    assert sel.matches(m.properties) and sel.matches(back)
