"""STOMP 1.2 frames: building, escaping, scanning, and the SEND template offsets."""

from __future__ import annotations

import pytest
from relaymq_bench import payload
from relaymq_bench import stomp_codec as sc


def test_build_frame_escapes_headers_but_not_connect():
    fr = sc.build_frame("SEND", {"destination": "/queue/a:b", "x": "line\nbreak"}, b"hi")
    assert fr == b"SEND\ndestination:/queue/a\\cb\nx:line\\nbreak\n\nhi\x00"
    con = sc.connect_frame("/", "guest", "pa:ss")
    assert con.startswith(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n")
    assert b"passcode:pa:ss\n" in con  # CONNECT headers are not escaped (spec)
    assert b"login" not in sc.connect_frame("/", None, None)


def test_escape_roundtrip():
    raw = "a:b\\c\nd\re"
    assert sc.unescape(sc.escape(raw)) == raw


def test_parse_frame_incomplete_then_complete():
    fr = sc.build_frame("RECEIPT", {"receipt-id": "r0000000009"})
    assert sc.parse_frame(fr[:-1]) == (None, 0)
    frame, pos = sc.parse_frame(b"\n\r\n" + fr)  # leading heart-beat EOLs
    assert frame == sc.Frame("RECEIPT", {"receipt-id": "r0000000009"}, b"")
    assert pos == len(fr) + 3


def test_parse_frame_content_length_allows_nul_in_body():
    body = b"a\x00b\x00"
    fr = sc.build_frame("MESSAGE", {"content-length": len(body), "k": "v:w"}, body)
    frame, pos = sc.parse_frame(fr + b"TAIL")
    assert frame.body == body and frame.headers["k"] == "v:w" and pos == len(fr)
    broken = fr[:-1] + b"X" + b"more"
    with pytest.raises(sc.StompError):
        sc.parse_frame(broken)


def test_parse_frame_crlf_and_repeated_headers():
    fr = b"MESSAGE\r\nfoo:1\r\nfoo:2\r\n\r\nbody\x00"
    frame, pos = sc.parse_frame(fr)
    assert frame.headers == {"foo": "1"} and frame.body == b"body" and pos == len(fr)


def test_error_text():
    fr, _ = sc.parse_frame(sc.build_frame("ERROR", {"message": "denied"}, b"details\n"))
    assert sc.error_text(fr) == "denied details"


def test_send_template_offsets_are_patchable():
    body = payload.make_body(100, run=5, producer=1)
    tpl = sc.SendTemplate("/queue/bench", body, persistent=True)
    plain = bytearray(tpl.plain)
    payload.SEQ_TS.pack_into(plain, tpl.seq_offset_plain, 17, 1700)
    frame, _ = sc.parse_frame(bytes(plain))
    assert frame.command == "SEND"
    assert frame.headers == {"destination": "/queue/bench", "content-length": "100",
                             "persistent": "true"}
    assert payload.read_stamp(frame.body, 0) == payload.Stamp(5, 1, 17, 1700)

    rec = bytearray(tpl.with_receipt)
    rec[tpl.receipt_offset:tpl.receipt_offset + 10] = b"%010d" % 12345
    payload.SEQ_TS.pack_into(rec, tpl.seq_offset_receipt, 18, 1800)
    frame, _ = sc.parse_frame(bytes(rec))
    assert frame.headers["receipt"] == "r0000012345"
    assert sc.receipt_number(frame.headers["receipt"]) == 12345
    assert payload.read_stamp(frame.body, 0) == payload.Stamp(5, 1, 18, 1800)
    assert b"persistent" not in sc.SendTemplate("/queue/b", body, persistent=False).plain


def test_receipt_number_rejects_foreign_ids():
    assert sc.receipt_number("sub-0") == -1
    assert sc.receipt_number("r12") == -1
    assert sc.SendTemplate.receipt_id(3) == b"r0000000003"


def test_scan_message_and_header_value():
    body = payload.make_body(40, 1, 0, 7, 70)
    m1 = (b"MESSAGE\ndestination:/queue/q\nack:ID\\c1\ncontent-length:40\n\n" + body + b"\x00")
    m2 = b"MESSAGE\nmessage-id:2\n\nno-length\x00"
    data = m1 + b"\n" + m2
    s1 = sc.scan_message(data, 0)
    assert s1 is not None and data[s1.body_start:s1.body_end] == body
    assert sc.header_value(data, s1.start, s1.headers_end, b"ack") == b"ID\\c1"
    assert sc.header_value(data, s1.start, s1.headers_end, b"missing") is None
    s2 = sc.scan_message(data, s1.next_pos)
    assert data[s2.body_start:s2.body_end] == b"no-length" and s2.next_pos == len(data)
    assert sc.scan_message(m1[:-1], 0) is None  # NUL not yet received
    assert sc.scan_message(m1[:20], 0) is None  # headers incomplete
    seq, ts = sc.unpack_seq_ts(data, s1.body_start + payload.SEQ_OFFSET)
    assert (seq, ts) == (7, 70)
