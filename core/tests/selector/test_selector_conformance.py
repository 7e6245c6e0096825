"""Every case of the shared JMS selector conformance file, through the public API.

The file (verified against a reference implementation) gives a selector, typed
JMS header fields and properties, and the expected outcome: ``true``/``false``
for matching, ``"invalid"`` for selectors that must be rejected at compile
time, and ``tri`` for the three-valued result.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from relaymq.model.jtypes import Float32, Int32
from relaymq.selector import InvalidSelector, Selector

_REPO = Path(__file__).resolve().parents[3]
#: The project's shared conformance data (beside the checkout) wins; the copy kept
#: with the tests makes a checkout without shared/ still run every case.
_SHARED = _REPO.parent / "shared" / "conformance" / "selectors-public.json"
CONFORMANCE = (
    _SHARED if _SHARED.exists() else Path(__file__).parent / "data" / "selectors-public.json"
)

_TRI = {True: "TRUE", False: "FALSE", None: "UNKNOWN"}


def _load() -> list[dict[str, Any]]:
    return json.loads(CONFORMANCE.read_text())["cases"]


CASES = _load()


def typed_value(prop: dict[str, Any]) -> object:
    """Map a typed JMS property to what the kernel hands the selector.

    Java ints (byte, short, int) are `Int32`, longs plain ints; a Java ``float``
    is a `Float32` holding its 32-bit value widened to a double, so 1.1f is
    1.100000023841858, not 1.1 (hence ``floatProp = 1.1`` is FALSE, as in Java).
    """
    kind = prop["type"]
    value = prop["value"]
    if kind == "null" or value is None:
        return None
    if kind == "float":
        return Float32(struct.unpack("<f", struct.pack("<f", float(value)))[0])
    if kind == "double":
        return float(value)
    if kind in ("byte", "short", "int"):
        return Int32(value)
    if kind == "long":
        return int(value)
    if kind == "boolean":
        return bool(value)
    if kind == "string":
        return str(value)
    raise AssertionError(f"unknown property type {kind}")


def fields_for(case: dict[str, Any]) -> dict[str, object]:
    fields: dict[str, object] = dict(case.get("headers", {}))
    for name, prop in case.get("properties", {}).items():
        fields[name] = typed_value(prop)
    return fields


def test_conformance_file_is_present_and_complete() -> None:
    assert CASES, f"conformance data missing at {CONFORMANCE}"
    assert len(CASES) >= 190
    assert len({c["id"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_conformance_case(case: dict[str, Any]) -> None:
    text = case["selector"]
    if case["expect"] == "invalid":
        with pytest.raises(InvalidSelector) as info:
            Selector.compile(text)
        assert 0 <= info.value.offset <= len(text)
        assert f"offset {info.value.offset}" in str(info.value)
        return
    selector = Selector.compile(text)
    fields = fields_for(case)
    result = selector.evaluate(fields)
    assert selector.matches(fields) is case["expect"]
    if "tri" in case:
        assert _TRI[result] == case["tri"]
    else:  # pragma: no cover - every non-invalid case carries tri today
        assert (result is True) is case["expect"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_conformance_case_with_string_conversion(case: dict[str, Any]) -> None:
    """Typed values are never strings-vs-numbers here, so the STOMP flag changes nothing."""
    text = case["selector"]
    if case["expect"] == "invalid":
        with pytest.raises(InvalidSelector):
            Selector.compile(text, string_conversion=True)
        return
    selector = Selector.compile(text, string_conversion=True)
    fields = fields_for(case)
    if case["id"] == "sel-073":
        # SessionserverId is the long 1234: no string involved, still FALSE.
        assert selector.evaluate(fields) is False
    assert selector.matches(fields) is case["expect"]
