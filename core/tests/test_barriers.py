"""relaymq.testing.barriers: a barrier returns what came before its marker, skips
earlier markers, and fails when its marker does not come."""

from __future__ import annotations

import pytest
from relaymq.testing.barriers import assert_nothing_before_marker, before_marker


async def test_what_came_before_the_marker_and_nothing_the_next_time(vm_connection):
    c = await vm_connection.consumer("queue://B")
    await vm_connection.send("queue://B", "first")
    await vm_connection.send("queue://B", "second")
    assert await before_marker(vm_connection, "queue://B", c) == ["first", "second"]
    assert await before_marker(vm_connection, "queue://B", c) == []
    await vm_connection.send("queue://B", "late")
    with pytest.raises(AssertionError, match="1 message.*'late'"):
        await assert_nothing_before_marker(vm_connection, "queue://B", c)


async def test_an_earlier_marker_is_not_counted(vm_connection):
    a = await vm_connection.consumer("topic://T")
    b = await vm_connection.consumer("topic://T")
    await vm_connection.send("topic://T", "x")
    assert await before_marker(vm_connection, "topic://T", a) == ["x"]
    assert await before_marker(vm_connection, "topic://T", b) == ["x"]  # a's marker skipped


async def test_a_marker_that_cannot_arrive_fails_the_test(vm_connection):
    c = await vm_connection.consumer("queue://S", selector="never = 1")
    with pytest.raises(AssertionError, match="did not arrive"):
        await before_marker(vm_connection, "queue://S", c, timeout=0.3)
