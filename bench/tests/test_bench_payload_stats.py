"""Body prefix layout, latency encoding between processes, and percentile maths."""

from __future__ import annotations

import json
from array import array

import pytest
from relaymq_bench import payload
from relaymq_bench.stats import latency_summary_us, median, percentile_sorted, spread
from relaymq_bench.worker import decode_latencies, encode_latencies


def test_body_prefix_roundtrip_and_size():
    body = payload.make_body(1024, run=0xDEADBEEF, producer=3, seq=2**40, ts=-5)
    assert len(body) == 1024 and body[:4] == b"RMQB"
    assert payload.read_stamp(body, 0) == payload.Stamp(0xDEADBEEF, 3, 2**40, -5)
    assert payload.AFTER_MAGIC.unpack_from(body, 4) == (0xDEADBEEF, 3, 2**40, -5)
    assert len(payload.make_body(28, 1, 1)) == 28
    with pytest.raises(ValueError):
        payload.make_body(27, 1, 1)


def test_seq_offset_points_at_seq_then_ts():
    body = bytearray(payload.make_body(64, 1, 2))
    payload.SEQ_TS.pack_into(body, payload.SEQ_OFFSET, 99, 123)
    assert payload.read_stamp(bytes(body), 0) == payload.Stamp(1, 2, 99, 123)


def test_read_stamp_rejects_foreign_bodies():
    assert payload.read_stamp(b"XXXX" + bytes(40), 0) is None
    assert payload.read_stamp(b"RMQB" + bytes(10), 0) is None


def test_latency_blob_survives_json():
    lat = array("q", [5, 1_000, 2_000_000_000, -3])
    blob = json.loads(json.dumps(encode_latencies(lat)))
    assert blob["count"] == 4 and blob["stride"] == 1
    assert list(decode_latencies(blob)) == [5, 1_000, 2_000_000_000, -3]


def test_percentiles_nearest_rank():
    values = list(range(1, 101))
    assert percentile_sorted(values, 50) == 50
    assert percentile_sorted(values, 99) == 99
    assert percentile_sorted(values, 100) == 100
    assert percentile_sorted([7], 99) == 7
    assert percentile_sorted([], 50) is None


def test_latency_summary_converts_ns_to_us():
    s = latency_summary_us([1_000, 2_000, 3_000, 4_000])
    assert s["p50"] == 2.0 and s["max"] == 4.0 and s["mean"] == 2.5 and s["samples"] == 4
    assert latency_summary_us([])["p99"] is None


def test_median_and_spread_ignore_missing():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    assert spread([None, 5.0, 1.0, 3.0]) == (3.0, 1.0, 5.0)
    assert spread([None]) == (None, None, None)
