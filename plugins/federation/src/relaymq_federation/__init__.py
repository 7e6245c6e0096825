"""RelayMQ federation: Artemis' ``<federation>``, ``<sender>``, ``<receiver>`` and
``<peer>`` inside ``<amqp-connection>`` (see docs/federation.md)."""
