"""Solace's queue semantics as RelayMQ queue types (docs/queue-types.md).

* `solace`: a queue with Solace's access type (exclusive: one active consumer,
  the others stand by in bind order), dead message queue, max redelivery and
  respect-TTL settings;
* `partitioned`: a non-exclusive queue with N partitions, each bound to one
  consumer, keyed by the message group id: ordered per key, parallel across keys;
* `lastValue`: a queue that holds only its newest message (Solace's LVQ), or the
  newest of each partition with `partitionCount`;
* `anonymous`: temporary queues kept 60 s for a client that disconnects,
  removed when it unbinds (Solace's anonymous queues).

The hooks (`hooks.py`) add the service behind ``broker.extensions["queue-types"]``:
topic subscriptions on queues and partition count changes, kept through
management's declared queue settings.
"""

from relaymq import compiled as _compiled

_compiled.select(__name__, __path__[0])
