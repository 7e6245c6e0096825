"""Support for the change-feed tests: a test plugin that records the feed, a broker
on a background loop (blocking STOMP/AMQP clients talk to it over real sockets),
and a broker process with a durable recorder (for kill -9).

Run as a script it is that broker process:
``python feed_support.py CONFIG OUT_FILE CURSOR_NAME`` -- the recorder reads the
durable cursor CURSOR_NAME and appends each event as a JSON line to OUT_FILE
then acknowledges it and writes ``{"kind": "acked", ...}``, except while the file
OUT_FILE.paused exists.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relaymq.broker.broker import Broker
from relaymq.config.model import BrokerConfig
from relaymq.feed import ChangeEvent, MessageAdded, MessageRemoved
from relaymq.testing.threads import BrokerThread


def describe(ev: ChangeEvent) -> dict[str, Any]:
    """An event as plain data (what the recorder writes and tests compare)."""
    out: dict[str, Any] = {"kind": ev.kind, "origin": ev.origin}
    if isinstance(ev, MessageAdded):
        out.update(dest=ev.destination.key, placements=[list(p) for p in ev.placements],
                   body=ev.message.body.decode(errors="replace"), id=ev.message.message_id)
    elif isinstance(ev, MessageRemoved):
        out.update(dest=ev.destination.key, key=ev.key, seq=ev.seq, reason=ev.reason,
                   id=ev.message.message_id)
    else:
        for name in ("destination", "topic"):
            if hasattr(ev, name):
                out[name] = getattr(ev, name).key
        for name in ("recovered", "key", "client_id", "name", "selector"):
            if hasattr(ev, name):
                out[name] = getattr(ev, name)
    return out


class FeedRecorder:
    """A test plugin: subscribes to the change feed while the broker is assembled
    (so it sees recovery too) and keeps every event."""

    def __init__(self, kinds: Any = None) -> None:
        self.kinds = kinds
        self.events: list[ChangeEvent] = []
        self.sub: Any = None

    def install(self, broker: Broker) -> None:
        self.sub = broker.change_feed.subscribe(self.kinds, name="recorder")

    def take(self) -> list[ChangeEvent]:
        """Everything recorded so far (runs on the broker's loop)."""
        self.events.extend(self.sub.drain())
        return list(self.events)


class BrokerLoop(BrokerThread):
    """A started broker whose loop runs on a daemon thread."""

    def __init__(self, config: BrokerConfig, setup: Callable[[Broker], Any] | None = None) -> None:
        super().__init__(config, setup, timeout=60)

    def port(self, scheme: str) -> int:
        return int(self.broker.connector_address(scheme).rsplit(":", 1)[1])


# -- the broker process with a durable recorder -------------------------------------------
async def _serve(config_path: str, out_path: str, cursor_name: str) -> None:
    from relaymq.config.loader import load_config

    broker = Broker(load_config(Path(config_path)), strict=True)
    await broker.start()
    cursor = await broker.change_feed.subscribe_durable(cursor_name)
    paused = Path(out_path + ".paused")
    print("ready", flush=True)
    with open(out_path, "a", encoding="utf-8") as out:
        while True:
            if paused.exists():
                await asyncio.sleep(0.05)
                continue
            ev = await cursor.get()
            out.write(json.dumps(describe(ev)) + "\n")
            out.flush()
            os.fsync(out.fileno())
            await cursor.ack()
            out.write(json.dumps({"kind": "acked", "position": cursor.position}) + "\n")
            out.flush()


if __name__ == "__main__":
    asyncio.run(_serve(*sys.argv[1:4]))
