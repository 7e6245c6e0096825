"""Solace's queue semantics as RelayMQ queue types (docs/queue-types.md).

* `solace`: a queue with Solace's access type (exclusive: one active consumer,
  the others stand by in bind order), dead message queue, max redelivery and
  respect-TTL settings;
* `partitioned`: a non-exclusive queue with N partitions, each bound to one
  consumer, keyed by the message group id: ordered per key, parallel across keys;
* `lastValue`: a queue that holds only its newest message (Solace's LVQ).
"""
