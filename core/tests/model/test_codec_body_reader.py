"""Stored messages whose body is a part of their encoded form keep one copy of it."""

from __future__ import annotations

import pytest
from relaymq.model import codec
from relaymq.model.codec import CorruptMessage, decode_message, encode_message, register_body_reader
from relaymq.model.destination import Destination
from relaymq.model.message import Message

ENCODING = "test-framed"


def framed(body: bytes) -> bytes:
    """A toy wire form: 6 header bytes, then the body."""
    return b"HDR" + len(body).to_bytes(3, "big") + body


def read_body(encoded: bytes) -> bytes:
    n = int.from_bytes(encoded[3:6], "big")
    if len(encoded) != 6 + n:
        raise ValueError("length mismatch")
    return encoded[6:]


@pytest.fixture
def reader():
    register_body_reader(ENCODING, read_body)
    yield
    codec._body_readers.pop(ENCODING, None)


def message(body: bytes, encoding: str = ENCODING) -> Message:
    return Message(body, destination=Destination.queue("q"), message_id="ID:1", durable=True,
                   encoded=framed(body), encoding=encoding, properties={"k": "v"})


def test_the_body_is_stored_once_and_read_back_from_the_encoded_form(reader) -> None:
    body = bytes(range(256)) * 40
    record = encode_message(message(body))
    assert len(record) < len(body) + 200  # one copy of the body, not two
    m = decode_message(record)
    assert m.body == body and m.encoded == framed(body)
    assert (m.message_id, m.durable, m.properties) == ("ID:1", True, {"k": "v"})


def test_without_a_reader_the_body_is_stored_beside_the_encoded_form() -> None:
    body = b"x" * 4000
    record = encode_message(message(body, encoding="other-wire"))
    assert len(record) > 2 * len(body)
    assert decode_message(record).body == body


def test_a_record_whose_reader_is_missing_is_a_clear_error(reader) -> None:
    record = encode_message(message(b"payload"))
    codec._body_readers.pop(ENCODING)
    with pytest.raises(CorruptMessage, match="no installed plugin reads that encoding"):
        decode_message(record)


def test_a_reader_that_fails_makes_the_record_corrupt(reader) -> None:
    m = message(b"payload")
    m.encoded = b"HDR\x00\x00\x09short"  # says 9 bytes, holds 5
    with pytest.raises(CorruptMessage, match="holds no readable body"):
        decode_message(encode_message(m))
