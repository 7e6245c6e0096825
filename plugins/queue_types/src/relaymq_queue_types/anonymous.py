"""The `anonymous` queue type: Solace's anonymous (non-durable) queues.

Meant for temporary queues (`<policyEntry tempQueue="true" queueType="anonymous"/>`):
a temporary queue a client made (STOMP `/temp-queue/..`, an AMQP dynamic
receiver, JMS `createTemporaryQueue`) is removed, with its messages,

* when its client *unbinds* from it (its last consumer closes while the client
  stays connected), or
* when its client disconnects and does not come back within
  `anonymousQueueGrace` ms (default 60000, Solace's sixty seconds). A connection
  with the same client id that consumes from the queue (by the name it was
  given, e.g. STOMP `/remote-temp-queue/NAME`, AMQP `temp-queue://NAME`) within
  the grace takes it over, messages included; messages sent to it meanwhile are
  kept. A connection without a client id cannot come back, so its queues go at
  once, as ActiveMQ's temporary queues do.

Without this type a temporary queue ends with its connection (ActiveMQ).
"""

from __future__ import annotations

from typing import Any

from relaymq.dispatch.queue import Queue

from relaymq_queue_types.solace import SolaceQueue, with_ttl_choice


class AnonymousQueue(SolaceQueue):
    """A temporary queue kept for its disconnected client, removed on unbind."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        #: seconds the broker keeps this temporary queue for its client (read by the kernel)
        self.reconnect_grace = max(0, self.policy.anonymous_queue_grace) / 1000


def anonymous_queue(*args: Any) -> Queue:
    """The `anonymous` entry point."""
    return with_ttl_choice(AnonymousQueue, *args)
