"""Queue declarations made at run time, kept in the store across restarts.

A queue created through management with a queue type (`create_queue(name,
queue_type=..)`), or given settings by a plugin through management
(`set_queue_settings`: a queue type's topic subscriptions, its partition count,
...), is *declared*. Declarations live in the store like a destination under
the key ``declared://queues`` (an `AddDestination`, so every store that keeps
destinations keeps them: memory, kahaDB, JDBC), one record per queue: a
message whose ``declaration`` property is the JSON object
``{"queue": KEY, "type": NAME | null, "settings": {..}}``. Changing a queue's
declaration writes the new record and removes the old one in one store batch;
deleting the queue removes its record. At start-up the broker reads them back
before it recovers the queues, so a recovered queue gets its declared type.

Settings are plain JSON values (str, int, float, bool, None, lists and dicts of
them); a plugin owns the names it sets. On a store that is not persistent the
declarations last for the broker process, like everything else there.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import AddDestination, AddMessage, RemoveMessage, StoreOp

log = logging.getLogger("relaymq.region")

DECLARED_PREFIX = "declared://"
DECLARATIONS_KEY = DECLARED_PREFIX + "queues"
_PROPERTY = "declaration"


class QueueDeclarations:
    """The declared queue types and settings of one broker (`region.declarations`)."""

    def __init__(self, region: Any) -> None:  # the Region (not imported: no import cycle)
        self._region = region
        #: queue -> (record seq in the store (0: not stored), type, settings)
        self._records: dict[Destination, tuple[int, str | None, dict[str, Any]]] = {}
        self._last_seq = 0
        self._created = False

    # -- reading ------------------------------------------------------------------------
    def queue_type(self, dest: Destination) -> str | None:
        rec = self._records.get(dest)
        return rec[1] if rec is not None else None

    def settings(self, dest: Destination) -> dict[str, Any]:
        """A copy of `dest`'s declared settings ({} when none)."""
        rec = self._records.get(dest)
        return json.loads(json.dumps(rec[2])) if rec is not None else {}

    def declared(self) -> list[Destination]:
        return list(self._records)

    # -- start-up -----------------------------------------------------------------------
    async def load(self) -> dict[Destination, str]:
        """Read the stored declarations; returns the declared queue types."""
        region = self._region
        if not region.store_persistent:
            return {}
        store = region.store
        keys = await store.destinations()
        self._created = DECLARATIONS_KEY in keys
        if not self._created:
            return {}
        stats = await store.stats(DECLARATIONS_KEY)
        self._last_seq = stats.last_seq
        after = 0
        while True:
            page = await store.read(DECLARATIONS_KEY, after, 500)
            if not page:
                break
            for record in page:
                after = record.seq
                self._last_seq = max(self._last_seq, record.seq)
                try:
                    data = json.loads(record.message.properties[_PROPERTY])
                    dest = Destination.parse(data["queue"])
                    settings = data.get("settings") or {}
                    if not isinstance(settings, dict):
                        raise ValueError("settings is not an object")
                except (KeyError, ValueError, TypeError) as exc:
                    log.error("ignoring an unreadable queue declaration (record %d): %s",
                              record.seq, exc)
                    continue
                self._records[dest] = (record.seq, data.get("type") or None, settings)
        return {d: t for d, (_, t, _) in self._records.items() if t}

    # -- changing -----------------------------------------------------------------------
    async def declare(self, dest: Destination, queue_type: str | None = None,
                      settings: dict[str, Any] | None = None, *, replace: bool = False) -> None:
        """Record `dest`'s type (if given) and merge `settings` into its settings
        (a value of None removes that setting; `replace`: the settings become
        exactly `settings`). Stored before this returns."""
        seq, old_type, old = self._records.get(dest, (0, None, {}))
        merged = {} if replace else dict(old)
        for name, value in (settings or {}).items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        new_type = queue_type or old_type
        text = json.dumps({"queue": dest.key, "type": new_type, "settings": merged})
        region = self._region
        ops: list[StoreOp] = []
        new_seq = 0
        if region.store_persistent:
            if not self._created:
                ops.append(AddDestination(DECLARATIONS_KEY))
                self._created = True
            self._last_seq += 1
            new_seq = self._last_seq
            ops.append(AddMessage(DECLARATIONS_KEY, new_seq, Message(
                b"", durable=True, properties={_PROPERTY: text})))
            if seq:
                ops.append(RemoveMessage(DECLARATIONS_KEY, seq))
        self._records[dest] = (new_seq, new_type, merged)
        if ops:
            await region.writer.write(ops)

    async def forget(self, dest: Destination) -> None:
        """`dest` was deleted: its declaration goes too."""
        rec = self._records.pop(dest, None)
        if rec is not None and rec[0] and self._region.store_persistent:
            await self._region.writer.write([RemoveMessage(DECLARATIONS_KEY, rec[0])])
