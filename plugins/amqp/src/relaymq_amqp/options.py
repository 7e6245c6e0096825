"""`AmqpOptions`: an AMQP connector's settings, from its URI (docs/amqp.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class AmqpOptions:
    """Connector settings from the URI (see docs/amqp.md for each option)."""

    max_frame_size: int = 1024 * 1024
    channel_max: int = 32767
    idle_timeout_ms: int = 30000
    producer_credit: int = 1000
    max_message_size: int = 0
    connect_timeout_s: float = 30.0
    allow_non_sasl: bool = True
    mechanisms: tuple[str, ...] = ("PLAIN", "ANONYMOUS")
    maximum_connections: int = 0
    session_capacity: int = 0
    trace: bool = False
