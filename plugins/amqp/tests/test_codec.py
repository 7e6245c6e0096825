"""The codec against proton's own encoder and decoder (an independent implementation)."""

from __future__ import annotations

import time
import uuid

import pytest
from proton import Data, symbol, ulong
from proton import Described as PDescribed
from proton import Message as PMessage
from relaymq.model.destination import Destination
from relaymq.model.message import BodyType, Message
from relaymq_amqp.encode import encode, header_section, symbol_array
from relaymq_amqp.mapping import (
    destination_for,
    from_kernel,
    id_to_str,
    load_properties,
    str_to_id,
    to_kernel,
    with_delivery_count,
)
from relaymq_amqp.scanner import DecodeError, application_properties, decode, scan
from relaymq_amqp.types import Described, Symbol, Timestamp, UInt, ULong


def _materialize(v: object) -> object:
    """Proton hands out binaries as views into its own buffers; copy them."""
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, dict):
        return {_materialize(k): _materialize(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_materialize(x) for x in v]
    return v


def proton_decode(raw: bytes) -> object:
    d = Data()
    d.decode(raw)
    return _materialize(d.get_object())


def proton_encode(value: object) -> bytes:
    d = Data()
    d.put_object(value)
    return bytes(d.encode())


VALUES = [
    None, True, False, 0, 1, -1, 127, -128, 200, 70000, -70000, 2**40, -(2**40), 1.5,
    "", "hello", "é" * 300, b"", b"\x00\x01", b"x" * 300, [], [1, "a", None], {"a": 1, "b": [True]},
    {"k" * 10: {"nested": {"deep": b"bytes"}}}, uuid.UUID(int=12345),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_values_round_trip_through_proton(value: object) -> None:
    raw = encode(value)
    assert proton_decode(raw) == value
    assert decode(raw)[0] == value
    assert decode(proton_encode(value))[0] == value


def test_typed_values() -> None:
    assert proton_decode(encode(Symbol("sym"))) == symbol("sym")
    assert proton_decode(encode(ULong(2**64 - 1))) == ulong(2**64 - 1)
    assert proton_decode(encode(UInt(0))) == 0
    assert decode(encode(Timestamp(1700000000000)))[0] == 1700000000000
    arr = symbol_array(["a", "bb"])
    assert decode(encode(arr))[0] == ["a", "bb"]
    d = Data()
    d.put_array(False, Data.SYMBOL)
    d.enter()
    d.put_symbol("a")
    d.put_symbol("bb")
    d.exit()
    assert decode(bytes(d.encode()))[0] == ["a", "bb"]
    described = encode(Described(ULong(0x0000468C00000004), "a > 1"))
    got = proton_decode(described)
    assert isinstance(got, PDescribed) and got.descriptor == 0x0000468C00000004
    assert decode(described)[0] == Described(0x0000468C00000004, "a > 1")


@pytest.mark.parametrize("raw", [b"\xa1\x05ab", b"\xc0\x05\x02\x41", b"\xff", b"\xb0\x00\x00\xff\xff"])
def test_malformed_values_raise_decode_error(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(raw)


def full_message() -> PMessage:
    return PMessage(
        body="hello", durable=True, priority=7, ttl=5.0, id="ID:1", user_id=b"bob",
        address="queue://A", subject="T", reply_to="topic://R", correlation_id=ulong(42),
        content_type="text/plain", group_id="g", group_sequence=3,
        properties={"a": 1, "b": "x", "c": 2.5, "d": True, "e": None},
        annotations={symbol("x-opt-jms-dest"): 0}, creation_time=time.time(),
    )


def test_scan_finds_sections_without_touching_the_body() -> None:
    raw = bytes(full_message().encode())
    s = scan(raw)
    assert s.header == [True, 7, 5000]
    assert s.properties is not None and s.properties[0] == "ID:1"
    assert s.message_annotations is not None and s.application_properties is not None
    assert raw[s.body_start:s.body_end] == b"\x00Sw\xa1\x05hello"
    assert application_properties(raw) == {"a": 1, "b": "x", "c": 2.5, "d": True, "e": None}


def test_to_kernel_maps_header_and_properties() -> None:
    raw = bytes(full_message().encode())
    before = int(time.time() * 1000)
    m, _ = to_kernel(raw, None)
    after = int(time.time() * 1000) + 1
    assert m.destination == Destination.queue("A")
    assert (m.durable, m.priority, m.message_id, m.user_id, m.type) == (True, 7, "ID:1", "bob", "T")
    assert m.reply_to == Destination.topic("R")
    assert m.correlation_id == "AMQP_ULONG:42"
    assert (m.content_type, m.group_id, m.group_seq) == ("text/plain", "g", 3)
    assert before + 5000 <= m.expiration <= after + 5000  # ttl 5 s from arrival
    assert m.body == b"hello" and m.body_type == BodyType.TEXT
    assert m.encoded == raw and m.encoding == "amqp"
    assert m._properties is None  # lazy until asked
    assert m.properties["b"] == "x"


def test_relay_destination_from_annotation() -> None:
    pm = PMessage(body=b"x", address="T", annotations={symbol("x-opt-jms-dest"): 1})
    m, _ = to_kernel(bytes(pm.encode()), None)
    assert m.destination == Destination.topic("T")
    assert m.body_type == BodyType.BYTES


def test_redelivery_patches_only_the_header() -> None:
    raw = bytes(full_message().encode())
    patched = with_delivery_count(raw, 3)
    pm = PMessage()
    pm.decode(patched)
    assert (pm.delivery_count, pm.first_acquirer, pm.durable, pm.priority) == (3, False, True, 7)
    assert patched.endswith(raw[scan(raw).header_span[1]:])  # type: ignore[index]
    bare = bytes(PMessage(body=b"x").encode())
    pm.decode(with_delivery_count(bare, 1))
    assert pm.delivery_count == 1 and pm.body == b"x"


def test_from_kernel_builds_a_message_qpid_jms_understands() -> None:
    m = Message(b"hi", destination=Destination.topic("T"), message_id="ID:x", durable=True,
                priority=9, expiration=int(time.time() * 1000) + 60000, timestamp=5,
                correlation_id="AMQP_UUID:" + str(uuid.UUID(int=7)), reply_to=Destination.queue("R"),
                type="t", group_id="g", group_seq=2, user_id="u", content_type="text/plain",
                body_type=BodyType.TEXT, properties={"n": 1, "s": "v"},
                annotations={"original_destination": "queue://X"})
    pm = PMessage()
    pm.decode(from_kernel(m, delivery_count=2))
    assert pm.body == "hi" and pm.address == "topic://T" and pm.id == "ID:x"
    assert pm.correlation_id == uuid.UUID(int=7)
    assert (pm.durable, pm.priority, pm.delivery_count, pm.subject) == (True, 9, 2, "t")
    assert pm.reply_to == "queue://R" and pm.group_id == "g" and pm.group_sequence == 2
    assert pm.user_id == b"u" and pm.properties == {"n": 1, "s": "v"}
    assert pm.annotations["x-opt-jms-msg-type"] == 5 and pm.annotations["x-opt-jms-dest"] == 1
    assert pm.annotations["x-opt-original-destination"] == "queue://X"
    assert 0 < pm.ttl <= 60


@pytest.mark.parametrize("body", [b"bytes", {"map": 1}, [1, 2], None, 42])
def test_bodies_survive_kernel_round_trip(body: object) -> None:
    raw = bytes(PMessage(body=body).encode())
    m, _ = to_kernel(raw, Destination.queue("A"))
    pm = PMessage()
    pm.decode(from_kernel(m))
    assert pm.body == body


def test_stored_messages_load_properties_lazily() -> None:
    raw = bytes(PMessage(body=b"x", properties={"k": "v"}).encode())
    m = Message(b"x", encoded=raw, encoding="amqp", loader=load_properties)
    assert m.properties == {"k": "v"}


def test_ids_round_trip() -> None:
    for value in ["ID:a", ULong(5), uuid.UUID(int=1), b"\x01\x02"]:
        assert str_to_id(id_to_str(value)) == value


def test_addresses() -> None:
    assert destination_for("queue://A") == Destination.queue("A")
    assert destination_for("topic://A") == Destination.topic("A")
    assert destination_for("A") == Destination.queue("A")
    assert destination_for("A", ["topic"]) == Destination.topic("A")
    assert destination_for("A", ["queue"]) == Destination.queue("A")
    assert destination_for("temp-queue://X").is_temporary


def test_header_section_is_what_proton_writes() -> None:
    pm = PMessage(durable=True, priority=9)
    raw = bytes(pm.encode())
    assert raw.startswith(header_section(True, 9))


@pytest.mark.parametrize(("durable", "priority"), [(True, None), (False, None), (True, 7)])
def test_header_durability_and_priority_reach_the_kernel(durable: bool, priority: int | None) -> None:
    """A persistent message with a plain body (the header says only durable) takes
    the short path; any other header is scanned. Both give the same message."""
    pm = PMessage(body=b"payload", durable=durable)
    if priority is not None:
        pm.priority = priority
    raw = bytes(pm.encode())
    m, _ = to_kernel(raw, Destination.queue("A"))
    assert m.durable is durable and m.body == b"payload" and m.encoded == raw
    assert m.priority == (priority if priority is not None else 4)


# -- nesting and sizes a peer made up ----------------------------------------------------


def _lists(depth: int) -> bytes:
    import struct

    value = b"\x40"
    for _ in range(depth):
        value = b"\xd0" + struct.pack(">II", 4 + len(value), 1) + value
    return value


def test_nesting_up_to_the_limit_decodes_and_one_more_level_is_refused() -> None:
    import pytest
    from relaymq_amqp.scanner import MAX_DEPTH, DecodeError, decode

    value, _ = decode(_lists(MAX_DEPTH))
    for _ in range(MAX_DEPTH):
        value = value[0]
    assert value is None
    with pytest.raises(DecodeError, match="nested more than"):
        decode(_lists(MAX_DEPTH + 1))
    with pytest.raises(DecodeError, match="nested more than"):
        decode(b"\x00" * 1_000_000)  # a descriptor chain: refused long before the end


def test_skip_walks_a_descriptor_chain_without_recursion() -> None:
    import pytest
    from relaymq_amqp.scanner import MAX_DEPTH, DecodeError, skip

    chain = b"\x00" * MAX_DEPTH + b"\x40" * (MAX_DEPTH + 1)
    assert skip(chain + b"tail", 0) == len(chain)
    with pytest.raises(DecodeError, match="nested more than"):
        skip(b"\x00" * 500_000 + b"\x40" * 500_001, 0)


def test_counts_and_sizes_beyond_the_bytes_are_refused() -> None:
    import struct

    import pytest
    from relaymq_amqp.scanner import DecodeError, decode

    for bad in (b"\xd0" + struct.pack(">II", 5, 2**31) + b"\x40",
                b"\xf0" + struct.pack(">II", 5, 2**31) + b"\x40",
                b"\xd1" + struct.pack(">II", 2**31, 2) + b"\x40\x40",
                b"\xb1" + struct.pack(">I", 0xFFFFFFF0) + b"abc"):
        with pytest.raises(DecodeError):
            decode(bad)


def test_each_copy_keeps_its_own_messages_annotations() -> None:
    """Copies of different messages, one after the other and back, each keep the
    annotations of their own message (the last answer is reused only for the same bytes)."""
    def received(trace: str, body: str) -> Message:
        pm = PMessage(body=body, address="queue://Q", annotations={
            symbol("x-opt-trace"): trace, symbol("x-opt-jms-dest"): 0,
            symbol("x-opt-amq-mr-id"): 5})
        return to_kernel(bytes(pm.encode()), Destination.queue("Q"))[0]

    first, second = received("one", "a"), received("two", "b")
    out = []
    for m in (first, first, second, first):
        pm = PMessage()
        pm.decode(from_kernel(m.copy(destination=Destination.queue("DLQ"),
                                     annotations={"original_destination": "queue://Q"})))
        out.append((pm.body, pm.annotations.get("x-opt-trace"), "x-opt-amq-mr-id" in pm.annotations))
    assert out == [("a", "one", False), ("a", "one", False), ("b", "two", False),
                   ("a", "one", False)]
    # a message with nothing of its own to keep gets nothing
    plain = to_kernel(bytes(PMessage(body="p", address="queue://Q").encode()), Destination.queue("Q"))[0]
    pm = PMessage()
    pm.decode(from_kernel(plain.copy(priority=1)))
    assert set(pm.annotations) == {"x-opt-jms-msg-type", "x-opt-jms-dest"}
