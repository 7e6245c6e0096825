"""JMS 1.1 message selectors for RelayMQ.

Usage::

    from relaymq.selector import Selector, InvalidSelector

    sel = Selector.compile("color = 'red' AND weight > 2.5")
    sel.matches({"color": "red", "weight": 3})   # True
    sel.evaluate({"color": "red"})               # None (weight is NULL)

See docs/selectors.md for the grammar, semantics and ActiveMQ differences.
"""

from relaymq.selector.errors import InvalidSelector
from relaymq.selector.selector import CACHE_SIZE, Selector

__all__ = ["CACHE_SIZE", "InvalidSelector", "Selector"]
