"""AMQP 1.0 codec: exact encodings, proton cross-checks, and the hot-path readers."""

from __future__ import annotations

import struct

import proton
import pytest
from relaymq_bench import amqp_codec as ac
from relaymq_bench import payload


def proton_value(encoded: bytes):
    """Decode one AMQP value with proton (the reference implementation)."""
    d = proton.Data()
    d.decode(encoded)
    d.rewind()
    d.next()
    return d.get_object()


# --- primitives ------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [
    (0, b"\x43"), (5, b"\x52\x05"), (255, b"\x52\xff"), (256, b"\x70\x00\x00\x01\x00"),
    (0xFFFFFFFF, b"\x70\xff\xff\xff\xff"),
])
def test_uint_uses_smallest_encoding(value, expected):
    assert ac.uint(value) == expected
    assert ac.decode(expected) == (value, len(expected))


def test_uint_fixed_is_always_four_bytes():
    assert ac.uint_fixed(0) == b"\x70\x00\x00\x00\x00"


@pytest.mark.parametrize("value, expected", [
    (0, b"\x44"), (7, b"\x53\x07"), (1 << 40, b"\x80" + (1 << 40).to_bytes(8, "big")),
])
def test_ulong(value, expected):
    assert ac.ulong(value) == expected


def test_strings_symbols_binary_short_and_long():
    assert ac.string("hi") == b"\xa1\x02hi"
    assert ac.symbol("PLAIN") == b"\xa3\x05PLAIN"
    assert ac.binary(b"\x00\x01") == b"\xa0\x02\x00\x01"
    long = "x" * 300
    enc = ac.string(long)
    assert enc[:5] == b"\xb1" + struct.pack(">I", 300)
    assert ac.decode(enc) == (long, len(enc))
    sym, _ = ac.decode(ac.symbol("amqp:accepted:list"))
    assert isinstance(sym, ac.Symbol) and sym == "amqp:accepted:list"


def test_list_drops_trailing_nulls_and_counts_items():
    assert ac.list_([ac.null(), ac.null()]) == b"\x45"
    enc = ac.list_([ac.uint(1), ac.null(), ac.boolean(True), ac.null()])
    assert enc == b"\xc0\x05\x03\x52\x01\x40\x41"  # size counts the count byte
    assert ac.decode(enc)[0] == [1, None, True]


def test_list32_for_large_bodies_decodes():
    items = [ac.binary(b"a" * 200), ac.binary(b"b" * 200)]
    enc = ac.list_(items)
    assert enc[0] == 0xD0
    assert ac.decode(enc)[0] == [b"a" * 200, b"b" * 200]


def test_map_and_symbol_array_match_proton():
    m = ac.map_([(ac.symbol("k"), ac.string("v")), (ac.symbol("n"), ac.uint(3))])
    assert ac.decode(m)[0] == {"k": "v", "n": 3}
    assert proton_value(m) == {proton.symbol("k"): "v", proton.symbol("n"): 3}
    arr = ac.symbol_array(["queue", "topic"])
    assert ac.decode(arr)[0] == ["queue", "topic"]
    assert list(proton_value(arr)) == ["queue", "topic"]
    assert ac.symbol_array(["queue"]) == ac.symbol("queue")


def test_decode_rejects_truncated_and_unknown_input():
    with pytest.raises(ac.AmqpDecodeError):
        ac.decode(b"\xa1\x05ab")
    with pytest.raises(ac.AmqpDecodeError):
        ac.decode(b"\x70\x00\x01")
    with pytest.raises(ac.AmqpDecodeError):
        ac.decode(b"\xff")
    with pytest.raises(ac.AmqpDecodeError):
        ac.decode(b"\xc0\x05\x01\x43")  # list claims 4 more bytes than its one item uses


# --- performatives, cross-checked with proton -------------------------------
def _body(frame: bytes) -> bytes:
    size, doff, ftype, channel = struct.unpack_from(">IBBH", frame)
    assert size == len(frame)
    return frame[doff * 4:]


def test_open_frame_matches_proton_decoding():
    fr = ac.open_frame("bench-1", "localhost", 65536, 0, 30000)
    described = proton_value(_body(fr))
    assert described.descriptor == 0x10
    assert described.value == ["bench-1", "localhost", 65536, 0, 30000]


def test_attach_frame_for_receiver_and_sender():
    src = ac.terminus(ac.SOURCE, "/queue/q", 2, ["queue"])
    tgt = ac.terminus(ac.TARGET, None)
    fr = ac.attach_frame("rx", 0, True, src, tgt, snd_settle_mode=1)
    code, fields, _ = ac.decode_performative(_body(fr))
    assert code == ac.ATTACH
    assert fields[:5] == ["rx", 0, True, 1, 0]
    source = fields[5]
    assert source.descriptor == ac.SOURCE
    assert source.value[0] == "/queue/q" and source.value[1] == 2
    assert source.value[10] == "queue"  # capabilities are field 10 of a source
    assert len(fields) == 7  # receivers omit initial-delivery-count
    d = proton_value(_body(fr))
    assert d.value[0] == "rx"
    sender = ac.attach_frame("tx", 1, False, tgt, ac.terminus(ac.TARGET, "queue://x"))
    _, sfields, _ = ac.decode_performative(_body(sender))
    assert sfields[9] == 0  # initial-delivery-count
    assert sfields[6].value[0] == "queue://x"


def test_flow_and_disposition_frames():
    fl = ac.flow_frame(7, 1000, 3, 2000, handle=0, delivery_count=5, link_credit=500)
    code, fields, _ = ac.decode_performative(_body(fl))
    assert code == ac.FLOW and fields[:7] == [7, 1000, 3, 2000, 0, 5, 500]
    disp = ac.disposition_frame(10, 300)
    body = _body(disp)
    assert ac.parse_disposition(body, 0, len(body)) == (True, 10, 300, True, ac.ACCEPTED)
    d = proton_value(body)
    assert d.descriptor == ac.DISPOSITION and d.value[:4] == [True, 10, 300, True]


def test_parse_disposition_variants():
    # list32, last omitted (null), settled as 0x56 01, rejected outcome
    items = [b"\x41", b"\x70\x00\x00\x01\x00", b"\x40", b"\x56\x01",
             ac.composite(ac.REJECTED, [])]
    raw = b"".join(items)
    body = b"\x00\x53\x15\xd0" + struct.pack(">II", len(raw) + 4, len(items)) + raw
    assert ac.parse_disposition(body, 0, len(body)) == (True, 256, 256, True, ac.REJECTED)
    # two fields only: unsettled, no state
    body = b"\x00\x53\x15\xc0\x03\x02\x41\x43"
    assert ac.parse_disposition(body, 0, len(body)) == (True, 0, 0, False, None)


def test_sasl_init_plain():
    fr = ac.sasl_init_frame("PLAIN", ac.sasl_plain_response("guest", "pw"), "h")
    assert fr[5] == ac.FRAME_SASL
    code, fields, _ = ac.decode_performative(_body(fr))
    assert code == ac.SASL_INIT
    assert fields == ["PLAIN", b"\x00guest\x00pw", "h"]


def test_split_frames_keeps_partial_and_skips_nothing():
    a = ac.open_frame("a")
    b = ac.begin_frame()
    data = a + ac.EMPTY_FRAME + b + b[:5]
    frames, used = ac.split_frames(data)
    assert used == len(a) + 8 + len(b)
    assert [len(f.body) for f in frames] == [len(a) - 8, 0, len(b) - 8]
    with pytest.raises(ac.AmqpDecodeError):
        ac.split_frames(b"\x00\x00\x00\x04\x02\x00\x00\x00")


# --- transfer template (producer hot path) ----------------------------------
def _template(durable: bool = True, size: int = 1024, max_frame: int = 1 << 20):
    body = payload.make_body(size, run=9, producer=3)
    return ac.TransferTemplate(0, body, payload.SEQ_OFFSET, durable, max_frame), body


def test_transfer_template_patches_ids_and_stamp():
    tpl, body = _template()
    buf = bytearray(tpl.data) * 2
    tpl.pack_into(buf, 0, 41, 41, 111)
    tpl.pack_into(buf, tpl.size, 42, 42, 222)
    frames, used = ac.split_frames(bytes(buf))
    assert used == len(buf) and len(frames) == 2
    for fr, did, ts in zip(frames, (41, 42), (111, 222), strict=True):
        code, fields, off = ac.decode_performative(fr.body)
        assert code == ac.TRANSFER
        assert fields[:6] == [0, did, struct.pack(">I", did), 0, False, False]
        msg = proton.Message()
        msg.decode(fr.body[off:])  # proton reads our sections
        assert msg.durable is True
        assert payload.read_stamp(bytes(msg.body), 0) == payload.Stamp(9, 3, did, ts)
        assert len(msg.body) == len(body)


def test_transient_template_has_no_header_section():
    tpl, _ = _template(durable=False)
    fr = ac.split_frames(tpl.data)[0][0]
    _, _, off = ac.decode_performative(fr.body)
    assert fr.body[off:off + 3] == b"\x00\x53\x75"  # data section first
    msg = proton.Message()
    msg.decode(fr.body[off:])
    assert not msg.durable


def test_transfer_template_splits_when_frame_too_small():
    tpl, body = _template(size=1500, max_frame=512)
    assert tpl.frames_per_message == 4
    buf = bytearray(tpl.data)
    tpl.pack_into(buf, 0, 7, 7, 70)
    frames, used = ac.split_frames(bytes(buf))
    assert used == len(buf)
    assert all(8 + len(f.body) <= 512 for f in frames)
    payload_bytes = b""
    mores = []
    for i, fr in enumerate(frames):
        did, settled, more, start = ac.parse_transfer(fr.body, 0, len(fr.body))
        assert did == (7 if i == 0 else None)
        mores.append(more)
        payload_bytes += fr.body[start:]
    assert mores == [True, True, True, False]
    msg = proton.Message()
    msg.decode(payload_bytes)
    assert payload.read_stamp(bytes(msg.body), 0) == payload.Stamp(9, 3, 7, 70)
    with pytest.raises(ValueError):
        _template(max_frame=60)


# --- transfer parser (consumer hot path) -------------------------------------
# A transfer as RabbitMQ 3.10 sends it: list8 with 11 fields, delivery-id as
# uint0, an 8-byte tag, then header + properties + data sections.
RABBIT_PERFORMATIVE = bytes.fromhex("005314c0150b4343a00800000000000000014342424040424242")


def test_parse_transfer_on_rabbitmq_layout():
    sections = (bytes.fromhex("005370c006054240404140") + b"\x00\x53\x75\xa0\x1c"
                + payload.make_body(28, 1, 2, 3, 4))
    body = RABBIT_PERFORMATIVE + sections
    did, settled, more, start = ac.parse_transfer(body, 0, len(body))
    assert (did, settled, more) == (0, False, False)
    assert body[start:] == sections
    i = body.find(payload.MAGIC, start)
    assert payload.read_stamp(body, i) == payload.Stamp(1, 2, 3, 4)


@pytest.mark.parametrize("did_enc, did", [
    (b"\x43", 0), (b"\x52\x09", 9), (b"\x70\x00\x01\x00\x00", 65536), (b"\x40", None),
])
def test_parse_transfer_delivery_id_encodings(did_enc, did):
    items = [b"\x52\x01", did_enc, b"\xa0\x01\x07", b"\x43", b"\x56\x01", b"\x41"]
    raw = b"".join(items)
    perf = b"\x00\x53\x14\xc0" + bytes((len(raw) + 1, len(items))) + raw
    body = perf + b"PAYLOAD"
    assert ac.parse_transfer(body, 0, len(body)) == (did, True, True, len(perf))


def test_parse_transfer_list32_and_short_lists():
    items = [b"\x43", b"\x52\x02"]
    raw = b"".join(items)
    perf = b"\x00\x53\x14\xd0" + struct.pack(">II", len(raw) + 4, len(items)) + raw
    body = perf + b"x"
    assert ac.parse_transfer(body, 0, len(body)) == (2, False, False, len(perf))
    with pytest.raises(ac.AmqpDecodeError):
        bad = b"\x00\x53\x14\xc0\x40\x01\x43"  # list size beyond the frame
        ac.parse_transfer(bad, 0, len(bad))
