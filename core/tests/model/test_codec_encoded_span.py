"""`encoded_span`: where a stored record keeps its transport bytes, from its header alone."""

from __future__ import annotations

import pytest
from relaymq.model import codec
from relaymq.model.codec import CorruptMessage, encode_message, encoded_span
from relaymq.model.destination import Destination
from relaymq.model.message import Message

WIRE = b"\x00Sp" + bytes(range(256)) * 4


def message(**kw: object) -> Message:
    m = Message(b"the body", destination=Destination.queue("q"), message_id="ID:1",
                timestamp=1_700_000_000_123, **kw)  # type: ignore[arg-type]
    m.encoded = WIRE
    m.encoding = "wire"
    return m


@pytest.mark.parametrize("extra", [
    {},
    {"properties": {"k": "v", "n": 2}, "annotations": {"x-opt-a": 1}, "correlation_id": "c",
     "type": "t", "group_id": "g", "user_id": "u", "content_type": "text/plain"},
])
def test_the_span_is_the_stored_bytes(extra: dict[str, object]) -> None:
    m = message(**extra)
    m.scheduled_delay = 5 if extra else 0
    record = encode_message(m)
    stamp, start, end = encoded_span(record, "wire")
    assert stamp == 1_700_000_000_123 and record[start:end] == WIRE


def test_the_body_kept_only_in_the_encoded_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(codec._body_readers, "wire", lambda data: b"the body")
    record = encode_message(message())
    assert len(record) < len(WIRE) + 100  # one copy: the body is not stored apart
    _, start, end = encoded_span(record, "wire")
    assert record[start:end] == WIRE


def test_no_span_for_another_encoding_or_none() -> None:
    assert encoded_span(encode_message(message()), "other") == (1_700_000_000_123, -1, -1)
    plain = Message(b"x", timestamp=7)
    assert encoded_span(encode_message(plain), "wire") == (7, -1, -1)
    assert encoded_span(codec._encode_v1(message()), "wire") == (0, -1, -1)  # decode those


def test_truncated_or_foreign_records_are_corrupt() -> None:
    record = encode_message(message(properties={"k": "v"}))
    for cut in (10, 40, len(record) - len(WIRE) - 2, len(record) - 1):
        with pytest.raises(CorruptMessage, match="truncated"):
            encoded_span(record[:cut], "wire")
    with pytest.raises(CorruptMessage, match="bad magic"):
        encoded_span(b"XX" + record[2:], "wire")


@pytest.mark.parametrize("timestamp", [0, 1, -1, -1_700_000_000_123, 2**63 - 1, -(2**63)])
def test_every_field_set_and_any_timestamp_agree_with_the_full_decoder(timestamp: int) -> None:
    m = message(properties={"k": "v"}, annotations={"x-opt-a": 1}, correlation_id="c" * 300,
                reply_to=Destination.topic("r"), type="t", group_id="g", user_id="u",
                content_type="text/plain", body_type="bytes", producer_id="p")
    m.origin = "broker-é"
    m.timestamp = timestamp
    m.scheduled_delay = 9
    record = encode_message(m)
    stamp, start, end = encoded_span(record, "wire")
    decoded = codec.decode_message(record)
    assert (stamp, record[start:end]) == (decoded.timestamp, decoded.encoded) == (timestamp, WIRE)


@pytest.mark.parametrize("other", ["wir", "wire2", "WIRE", ""])
def test_only_the_exact_encoding_name_matches(other: str) -> None:
    assert encoded_span(encode_message(message()), other) == (1_700_000_000_123, -1, -1)
