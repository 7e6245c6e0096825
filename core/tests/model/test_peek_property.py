"""`Message.peek_property` (the routing path's look at `_AMQ_DUPL_ID`) on lazily
loaded properties: it answers without keeping the parsed map, so the stored
record keeps the properties in the encoded form only, not again as JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from relaymq.model import codec
from relaymq.model.codec import decode_message, encode_message, register_property_loader
from relaymq.model.destination import Destination
from relaymq.model.message import Message, wire_message

ENCODING = "test-props"


def load(m: Message) -> dict[str, Any]:
    """A toy wire form: ``PRP:`` then the properties as JSON."""
    assert m.encoded is not None
    return dict(json.loads(m.encoded[4:]))


@pytest.fixture
def loader() -> Any:
    register_property_loader(ENCODING, load)
    yield
    codec._loaders.pop(ENCODING, None)


def test_a_peeked_id_leaves_the_properties_in_the_encoded_form_only(loader: Any) -> None:
    props = {"_AMQ_DUPL_ID": "id-1", "n": 1}
    m = wire_message(b"body", Destination.queue("q"), "bytes",
                     b"PRP:" + json.dumps(props).encode(), ENCODING, loader=load)
    m.durable = True
    assert m.peek_property("_AMQ_DUPL_ID", b"_AMQ_DUPL_ID") == "id-1"
    assert m.peek_property("AMQ_SCHEDULED_CRON", b"AMQ_SCHEDULED_CRON") is None
    record = encode_message(m)
    flags = int.from_bytes(record[2:6], "big")
    assert not flags & codec._F_PROPS  # no JSON copy of the properties in the record
    assert decode_message(record).properties == props  # read back from the encoded form
    assert m.properties == props
