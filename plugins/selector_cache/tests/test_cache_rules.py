"""SelectorCache rules and the LIKE-wildcard finder, without a broker."""

from __future__ import annotations

import pytest
from relaymq.model.destination import Destination
from relaymq.selector import Selector
from relaymq_selector_cache.cache import SelectorCache
from relaymq_selector_cache.wildcards import has_like_wildcards

Q = Destination.queue("Consumer.A.VirtualTopic.X")


def texts(cache: SelectorCache) -> list[str]:
    return [e.text for e in cache.entries(Q)]


def sel(text: str) -> Selector:
    return Selector.compile(text)


def test_selectors_accumulate_without_duplicates():
    cache = SelectorCache()
    assert cache.consumer_added(Q, sel("a = 1"))
    assert not cache.consumer_added(Q, sel("a = 1"))
    assert cache.consumer_added(Q, None)
    assert texts(cache) == ["a = 1", "TRUE"]
    assert cache.version == 2


def test_removing_consumers_keeps_their_selectors():
    cache = SelectorCache()
    cache.consumer_added(Q, sel("a = 1"))
    assert not cache.consumer_removed(Q, sel("a = 1"))
    assert not cache.consumer_removed(Q, None)
    assert texts(cache) == ["a = 1"]


def test_single_selector_rules():
    cache = SelectorCache(single_selector_per_destination=True)
    cache.consumer_added(Q, sel("a = 1"))
    cache.consumer_added(Q, None)
    cache.consumer_added(Q, sel("b = 2"))
    assert texts(cache) == ["TRUE", "b = 2"]
    assert not cache.consumer_added(Q, sel("b = 2"))  # same selector again: no change
    assert cache.consumer_removed(Q, None)
    assert texts(cache) == ["b = 2"]
    assert not cache.consumer_removed(Q, None)  # TRUE alone is never dropped this way


def test_compiled_selectors_follow_changes():
    cache = SelectorCache()
    cache.consumer_added(Q, sel("a = 1"))
    first = cache.selectors_for(Q)
    assert [s.text for s in first] == ["a = 1"]
    assert cache.selectors_for(Q) is first  # cached between changes
    cache.consumer_added(Q, sel("a = 2"))
    assert [s.text for s in cache.selectors_for(Q)] == ["a = 1", "a = 2"]
    assert cache.selectors_for(Destination.queue("unknown")) == ()


def test_forget():
    cache = SelectorCache()
    cache.consumer_added(Q, sel("a = 1"))
    cache.consumer_added(Q, sel("a = 2"))
    assert cache.forget(Q, "a = 1")
    assert texts(cache) == ["a = 2"]
    assert cache.forget(Q)
    assert cache.destinations == []
    assert not cache.forget(Q)


def test_json_round_trip():
    cache = SelectorCache()
    cache.consumer_added(Q, Selector.compile("p > 1", string_conversion=True))
    cache.consumer_added(Q, None)
    assert cache.to_json() == {Q.key: [{"selector": "p > 1", "stringConversion": True},
                                       {"selector": "TRUE"}]}


@pytest.mark.parametrize(("text", "wild"), [
    ("name LIKE 'ab%'", True),
    ("name LIKE 'a_c'", True),
    ("name like 'abc'", False),
    ("name NOT LIKE '%x'", True),
    (r"name LIKE 'a\%' ESCAPE '\'", False),
    (r"name LIKE 'a\%%' ESCAPE '\'", True),
    ("name = 'ab%'", False),
    ("note = 'x LIKE ''%'''", False),
    ("a = 1 AND (b = 2 OR c LIKE '_')", True),
    ("TRUE", False),
    ("not a selector (", False),
])
def test_like_wildcards(text, wild):
    assert has_like_wildcards(text) is wild
