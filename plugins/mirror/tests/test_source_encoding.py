"""What the source writes per event from the bytes it keeps per destination
(`wire.mirror_annotations`, `wire.post_ack_head`): read by proton's codec, the
same message and annotations as the generic encoder gives."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from proton import Message
from relaymq.model.destination import Destination
from relaymq.model.message import Message as KernelMessage
from relaymq_amqp.mapping import from_kernel
from relaymq_amqp.types import Long
from relaymq_mirror import wire


def _messages() -> list[bytes]:
    """Encoded messages of every shape a source forwards: with and without a
    header, with delivery annotations of their own (small and past 255 bytes)."""
    out = [from_kernel(KernelMessage(b"x" * 1024, destination=Destination.parse("queue://a"),
                                     message_id="ID:1", durable=True, properties={"n": 1}))]
    plain = Message(body="no header")
    out.append(bytes(plain.encode()))
    small = Message(body="hi", durable=True, priority=7, ttl=5)
    small.instructions = {"x-opt-own": "v"}
    out.append(bytes(small.encode()))
    large = Message(body="big", durable=True)
    large.instructions = {"x-opt-own": "v" * 300}
    large.annotations = {"x-opt-keep": 3}
    out.append(bytes(large.encode()))
    return out


@pytest.mark.parametrize("origin", [None, "node-1", "n" * 300])
@pytest.mark.parametrize("address", ["queue://orders", "a" * 400])
def test_a_send_with_kept_annotations_reads_as_the_original_with_the_mirrors(
        origin: str | None, address: str) -> None:
    before, after = wire.mirror_annotations(origin, address)
    for data in _messages():
        for ident in (0, 7, 2**62 + 5, 2**63 - 1):
            out = wire.with_annotations(data, ident, before, after)
            assert out == wire.with_mirror_annotations(data, ident, origin, address)
            original, mirrored = Message(), Message()
            original.decode(data)
            mirrored.decode(out)
            expected: dict[Any, Any] = {wire.INTERNAL_ID: ident, wire.INTERNAL_DESTINATION: address}
            if origin is not None:
                expected[wire.BROKER_ID] = origin
            assert dict(mirrored.instructions) == expected  # the message's own are replaced
            assert mirrored.body == original.body
            assert mirrored.annotations == original.annotations
            assert mirrored.durable == original.durable and mirrored.priority == original.priority
            inc = wire.Incoming(out)
            assert inc.mirror_id() == ident
            assert inc.string(wire.INTERNAL_DESTINATION, "delivery_annotations") == address


def test_a_truncated_message_is_refused() -> None:
    before, after = wire.mirror_annotations(None, "queue://a")
    data = _messages()[2]
    with pytest.raises(wire.BadEvent):
        wire.with_annotations(data[:6], 1, before, after)


@pytest.mark.parametrize("queue", ["orders", "q" * 260])
def test_a_postack_from_its_kept_head_reads_as_the_generic_encoding(queue: str) -> None:
    head = wire.post_ack_head("queue://orders", queue)
    for ident in (0, 9, 2**40 + 7, 2**63 - 1):
        fast = wire.post_ack_with(head, ident)
        assert fast == wire.post_ack("queue://orders", queue, ident, None, wire.NORMAL)
        generic = wire.control(wire.POST_ACK, {wire.ADDRESS: "queue://orders", wire.QUEUE: queue},
                               Long(ident))
        a, b = Message(), Message()
        a.decode(generic)
        b.decode(fast)
        assert b.annotations == a.annotations and b.body == a.body == ident


def test_the_internal_id_is_63_bits_of_the_blake2b_of_the_message_id() -> None:
    """The id every RelayMQ broker derives from a message id (and finds again
    after a restart from the stored message): the first 8 bytes of its 8-byte
    BLAKE2b digest, big-endian, top bit cleared. A change here would make a
    target's stored messages unfindable by the postAcks of a source of the
    previous version."""
    for mid in ("ID:relaymq-host-5672-1700000000000-1:1:1", "", "ID:ü-ß", "x" * 300):
        digest = hashlib.blake2b(mid.encode("utf-8"), digest_size=8).digest()
        assert wire.internal_id(mid) == int.from_bytes(digest, "big") & (2**63 - 1)
        assert wire.internal_id(mid) == wire.internal_id(mid)  # again, from the cache
    assert wire.internal_id(None) == wire.internal_id("")
    # pinned: the same on every machine and in every version
    assert wire.internal_id("ID:pinned") == 7001699625594041352


def test_internal_ids_of_a_long_backlog_stay_cached_and_stable() -> None:
    """Past the cache's size the ids are still the hash of the message id (the
    older generation is kept, then made again)."""
    ids = [f"ID:cache-{i}" for i in range(wire._IDS_KEPT * 2 + 10)]
    first = [wire.internal_id(i) for i in ids]
    assert len(set(first)) == len(ids)
    again = [wire.internal_id(i) for i in reversed(ids)]
    assert again[::-1] == first
    assert all(0 <= v < 2**63 for v in first)
