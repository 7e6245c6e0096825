"""The journal format: encoding round trips and what scanning finds in damaged bytes."""

from __future__ import annotations

import struct
import zlib

import pytest
from relaymq_kahadb.journal.records import (
    FILE_HEADER_LEN,
    OP_ADD,
    OP_ADD_DEST,
    OP_ADD_SUB,
    OP_MOVE,
    OP_PURGE,
    OP_REF,
    OP_REMOVE,
    OP_REMOVE_DEST,
    OP_REMOVE_RUN,
    REC_HEADER_LEN,
    RT_BATCH,
    BatchEncoder,
    CorruptRecord,
    ScanResult,
    check_file_header,
    file_header,
    parse_batch,
    record_header,
    scan,
)


def encoded() -> BatchEncoder:
    enc = BatchEncoder()
    enc.add_dest("queue://A")
    rel = enc.message(OP_ADD, "queue://A", 1, b"hello")
    enc.ref("durable://c:s", 9, rel, 5)
    enc.message(OP_MOVE, "queue://\u00e9", 2, b"")
    enc.remove(OP_REMOVE, "queue://A", 1, 3)
    enc.drop(OP_REMOVE_DEST, "queue://B", 77, (1, 2))
    enc.drop(OP_PURGE, "queue://C", 5, ())
    enc.add_sub("durable://c:s", {"client_id": "c", "name": "s", "topic": "topic://T"})
    return enc


def test_batch_round_trip() -> None:
    enc = encoded()
    payload = enc.payload()
    assert parse_batch(payload) == enc.ops
    rel = enc.ops[1][3]
    assert payload[rel:rel + 5] == b"hello"
    crc = int.from_bytes(payload[rel - 8:rel - 4], "big")
    assert crc == zlib.crc32(b"hello")
    assert {op[0] for op in enc.ops} == {OP_ADD_DEST, OP_ADD, OP_REF, OP_MOVE, OP_REMOVE,
                                         OP_REMOVE_DEST, OP_PURGE, OP_ADD_SUB}


def test_removal_run_round_trip_and_layout() -> None:
    """REMOVE_RUN: key once, a count, the sequences, then the files, big-endian."""
    enc = BatchEncoder()
    enc.remove(OP_REMOVE, "queue://A", 4, 2)
    enc.remove_run("queue://A", [7, 5, 2**40], [3, 0xFFFFFFFF, 1])
    enc.remove_run("queue://B", [], [])
    payload = enc.payload()
    assert parse_batch(payload) == enc.ops == [
        (OP_REMOVE, "queue://A", 4, 2),
        (OP_REMOVE_RUN, "queue://A", [7, 5, 2**40], [3, 0xFFFFFFFF, 1]),
        (OP_REMOVE_RUN, "queue://B", [], []),
    ]
    run = payload[3 + 9 + 12:]
    assert run[:12] == bytes([OP_REMOVE_RUN, 0, 9]) + b"queue://A"
    assert int.from_bytes(run[12:16], "big") == 3
    assert [int.from_bytes(run[16 + 8 * i:24 + 8 * i], "big") for i in range(3)] == [7, 5, 2**40]
    assert [int.from_bytes(run[40 + 4 * i:44 + 4 * i], "big") for i in range(3)] == [
        3, 0xFFFFFFFF, 1]


def test_removal_run_overrunning_its_record_is_corrupt() -> None:
    enc = BatchEncoder()
    enc.remove_run("queue://A", [1, 2], [1, 1])
    payload = enc.payload()
    with pytest.raises(CorruptRecord):
        parse_batch(payload[:-1])
    forged = payload[:12] + (10**6).to_bytes(4, "big") + payload[16:]
    with pytest.raises(CorruptRecord):
        parse_batch(forged)


def build_file(file_id: int, payloads: list[bytes]) -> tuple[bytearray, list[int]]:
    buf = bytearray(file_header(file_id))
    offsets = []
    for p in payloads:
        offsets.append(len(buf))
        buf += record_header(file_id, len(buf), RT_BATCH, p) + p
    return buf, offsets


def scanned(buf: bytes | bytearray, file_id: int = 3) -> tuple[list[int], ScanResult]:
    res = ScanResult()
    offs = [off for off, _t, _p in scan(bytes(buf), file_id, result=res)]
    return offs, res


def test_clean_file_and_zero_tail() -> None:
    payloads = [encoded().payload() for _ in range(5)]
    buf, offsets = build_file(3, payloads)
    end = len(buf)
    for tail in (0, 5, 11, 4096):  # preallocated zeros, shorter than a header or not
        offs, res = scanned(buf + bytes(tail))
        assert offs == offsets and not res.damage and res.end == end and res.header_error is None


def test_torn_tail() -> None:
    buf, offsets = build_file(3, [encoded().payload() for _ in range(4)])
    torn = buf[:-7]
    offs, res = scanned(torn)
    assert offs == offsets[:3]
    assert res.end == offsets[3]
    assert len(res.damage) == 1 and res.damage[0].tail and res.damage[0].start == offsets[3]


def test_damaged_span_in_the_middle_is_skipped() -> None:
    buf, offsets = build_file(3, [encoded().payload() for _ in range(4)])
    buf[offsets[1] + REC_HEADER_LEN + 3] ^= 0xFF
    offs, res = scanned(buf)
    assert offs == [offsets[0], offsets[2], offsets[3]]
    assert [(d.start, d.end, d.tail) for d in res.damage] == [(offsets[1], offsets[2], False)]
    assert "checksum" in res.damage[0].reason


def test_records_only_validate_where_they_were_written() -> None:
    payload = encoded().payload()
    buf, offsets = build_file(3, [payload])
    # the same bytes in another file, or shifted, are not a record there
    assert scanned(buf, file_id=4)[0] == []
    shifted = bytearray(file_header(3)) + bytes(10) + buf[FILE_HEADER_LEN:]
    assert scanned(shifted)[0] == []
    # a record embedded in a message body is not picked up when resynchronising
    inner = record_header(3, 100, RT_BATCH, payload) + payload
    body_payload = BatchEncoder()
    body_payload.message(OP_ADD, "queue://A", 1, inner * 3)
    buf, offsets = build_file(3, [body_payload.payload()])
    buf[offsets[0] + REC_HEADER_LEN] ^= 0xFF
    offs, res = scanned(buf)
    assert offs == [] and res.damage[0].tail


def test_file_header() -> None:
    assert check_file_header(file_header(7), 7) is None
    assert "db-7.log" in (check_file_header(file_header(7), 8) or "")
    bad = bytearray(file_header(7))
    bad[2] ^= 1
    assert check_file_header(bytes(bad), 7) is not None


def test_single_op_fast_paths_match_the_encoder() -> None:
    from relaymq_kahadb.journal.records import single_message, single_remove

    enc = BatchEncoder()
    enc.message(OP_ADD, "queue://\u00e9", 5, b"data")
    assert single_message(OP_ADD, "queue://\u00e9", 5, b"data") == (enc.payload(), enc.ops)
    enc = BatchEncoder()
    enc.remove(OP_REMOVE, "queue://A", 5, 7)
    assert single_remove("queue://A", 5, 7) == (enc.payload(), enc.ops)


def test_checksums_are_zlibs_crc32() -> None:
    """Records and messages are checksummed with zlib's CRC-32 whichever library
    computes it (ISA-L when installed): a journal written with one reads back with
    the other, and an older journal written with zlib reads back now."""
    from relaymq_kahadb.journal.checksum import crc32

    data = bytes(range(256)) * 41 + b"tail"
    for seed in (0, 1, 0xFFFFFFFF, 123456789):
        assert crc32(data, seed) == zlib.crc32(data, seed)
        assert crc32(memoryview(data)[7:999], seed) == zlib.crc32(data[7:999], seed)
    payload = encoded().payload()
    head = record_header(2, FILE_HEADER_LEN, RT_BATCH, payload)
    seed = zlib.crc32(struct.pack(">QQBI", 2, FILE_HEADER_LEN, RT_BATCH, len(payload)))
    assert head[-4:] == zlib.crc32(payload, seed).to_bytes(4, "big")
    assert file_header(5)[-4:] == zlib.crc32(file_header(5)[:12]).to_bytes(4, "big")
