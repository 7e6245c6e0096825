"""Broker hooks of relaymq-mirror (the `relaymq.hooks` entry point).

A mirror target's pending postAcks (`retries`) are looked for from the
broker's start, not only once a mirror link is back, and no longer once it
stops. Nothing here runs per message.
"""

from __future__ import annotations

from typing import Any

from relaymq.hookspecs import hookimpl

from relaymq_mirror.retries import EXTENSION, AckRetries, ack_retries


@hookimpl
def relaymq_broker_started(broker: Any) -> None:
    ack_retries(broker).start()


@hookimpl
def relaymq_broker_stopping(broker: Any) -> None:
    found = broker.extensions.get(EXTENSION)
    if isinstance(found, AckRetries):
        found.stop()
