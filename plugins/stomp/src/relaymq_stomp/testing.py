"""A blocking STOMP 1.2 client for tests that drive a real broker process; it
lives in `relaymq.testing.blocking_stomp` (core tests use it too) and is
re-exported here for the plugins' tests that import it from relaymq-stomp::

    from relaymq_stomp.testing import BlockingStomp
"""

from __future__ import annotations

from relaymq.testing.blocking_stomp import BlockingStomp, drain_queue

__all__ = ["BlockingStomp", "drain_queue"]
