"""Property values as ActiveMQ writes them into STOMP headers (Java's toString)."""

from __future__ import annotations

import math

import pytest
from relaymq.model.jtypes import Float32
from relaymq_stomp.java_text import java_double, java_string


@pytest.mark.parametrize(("value", "java"), [
    (1.0, "1.0"), (100.0, "100.0"), (1234.5, "1234.5"), (0.1, "0.1"), (-2.5, "-2.5"),
    (0.001, "0.001"), (9999999.0, "9999999.0"),  # plain from 10^-3 up to 10^7
    (1e7, "1.0E7"), (1e20, "1.0E20"), (2e23, "2.0E23"), (123456789.123, "1.23456789123E8"),
    (0.0005, "5.0E-4"), (1.5e-5, "1.5E-5"), (-2.5e-300, "-2.5E-300"),
    (5e-324, "4.9E-324"), (1.7976931348623157e308, "1.7976931348623157E308"),
    (0.0, "0.0"), (-0.0, "-0.0"), (math.nan, "NaN"), (math.inf, "Infinity"),
    (-math.inf, "-Infinity"),
])
def test_doubles_as_double_to_string(value: float, java: str) -> None:
    assert java_double(value) == java


@pytest.mark.parametrize(("value", "java"), [
    (1.1, "1.1"), (0.1, "0.1"), (3.4028235e38, "3.4028235E38"), (1.4e-45, "1.4E-45"),
    (16777216.0, "1.6777216E7"), (0.001, "0.001"),
])
def test_floats_as_float_to_string(value: float, java: str) -> None:
    assert java_double(Float32(value)) == java  # not the double it widens to


def test_lists_and_maps_as_collections_to_string() -> None:
    assert java_string([1, "a", True, None, 2.0]) == "[1, a, true, null, 2.0]"
    assert java_string({"k": [1e20], "m": {"x": False}}) == "{k=[1.0E20], m={x=false}}"
    assert java_string([]) == "[]" and java_string({}) == "{}"
    assert java_string(b"\x01\xff") == "01ff"
