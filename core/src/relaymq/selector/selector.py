"""The public face of the selector engine: :class:`Selector`.

Consumers of one destination very often share a selector string (every
instance of a scaled-out service subscribes with the same one), so compiled
selectors are cached by text in a bounded LRU; compiling is ~100x the cost of
one evaluation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from relaymq.selector.compiler import FieldSource, compile_tree
from relaymq.selector.errors import InvalidSelector
from relaymq.selector.nodes import identifiers
from relaymq.selector.parser import parse

#: How many distinct (text, string_conversion) pairs stay compiled.
CACHE_SIZE = 4096


class Selector:
    """A compiled JMS 1.1 message selector.

    Build with :meth:`compile`. Then, for a mapping of header identifiers and
    properties to ``bool``/``int``/``float``/``str`` values (a missing name is
    NULL):

    * ``evaluate(fields)`` returns ``True``, ``False`` or ``None`` (UNKNOWN);
    * ``matches(fields)`` returns ``evaluate(fields) is True``.

    Both are the generated functions themselves (stored per instance), so a
    call costs no extra Python frame. Neither raises for any field values.
    The fields are read only through ``fields.get(name)``.
    """

    __slots__ = ("text", "string_conversion", "identifiers", "evaluate", "matches", "source")

    text: str
    string_conversion: bool
    #: Names the selector reads; lets callers skip decoding unused properties.
    identifiers: frozenset[str]
    evaluate: Callable[[FieldSource], bool | None]
    matches: Callable[[FieldSource], bool]
    #: The generated Python source, for debugging and tests.
    source: str

    def __init__(self, text: str, string_conversion: bool = False) -> None:
        """Compile ``text`` without the cache; prefer :meth:`compile`."""
        if not isinstance(text, str):
            raise TypeError(f"selector text must be str, not {type(text).__name__}")
        try:
            tree = parse(text)
        except RecursionError:
            raise InvalidSelector("selector is nested too deeply", 0, text) from None
        evaluate, matches, source = compile_tree(tree, text, bool(string_conversion))
        self.text = text
        self.string_conversion = bool(string_conversion)
        self.identifiers = identifiers(tree) if tree is not None else frozenset()
        self.evaluate = evaluate
        self.matches = matches
        self.source = source

    @classmethod
    def compile(cls, text: str, string_conversion: bool = False) -> Selector:
        """Return the compiled selector for ``text``, from the cache when possible.

        Raises InvalidSelector (a ValueError) with ``offset`` set when the text
        is not a valid selector. With ``string_conversion=True`` (STOMP, whose
        header values are all strings) comparisons convert a string operand
        that parses as the other operand's number or boolean type.
        """
        if not isinstance(text, str):
            raise TypeError(f"selector text must be str, not {type(text).__name__}")
        if cls is not Selector:
            return cls(text, string_conversion)
        return _cached(text, bool(string_conversion))

    @staticmethod
    def cache_clear() -> None:
        """Drop every cached compiled selector (tests, memory pressure)."""
        _cached.cache_clear()

    @staticmethod
    def cache_info() -> functools._CacheInfo:
        """Hits, misses and size of the compiled-selector cache."""
        return _cached.cache_info()

    def __repr__(self) -> str:
        flag = ", string_conversion=True" if self.string_conversion else ""
        return f"Selector({self.text!r}{flag})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selector):
            return NotImplemented
        return (self.text, self.string_conversion) == (other.text, other.string_conversion)

    def __hash__(self) -> int:
        return hash((self.text, self.string_conversion))


@functools.lru_cache(maxsize=CACHE_SIZE)
def _cached(text: str, string_conversion: bool) -> Selector:
    return Selector(text, string_conversion)
