"""The broker's node id: the identity other brokers know it by.

Artemis names each broker by a UUID (its node id): it is the AMQP
``container-id`` of its broker connections, the ``x-opt-amq-bkr-id`` of
mirror links and events, and how federation and mirroring recognise where
something came from. RelayMQ keeps one per broker:

* a persistent store: a UUID kept in ``<dataDirectory>/node-id`` (made on
  first use), so it survives restarts, as Artemis keeps its node id in its
  journal's directory;
* the memory store: a new UUID per process (nothing survives a restart
  there anyway).
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Any

log = logging.getLogger("relaymq.outgoing")

_EXTENSION = "node-id"
FILE_NAME = "node-id"


def node_id(broker: Any) -> str:
    """The broker's node id (read or made once per broker object)."""
    ext = broker.extensions
    found = ext.get(_EXTENSION)
    if isinstance(found, str):
        return found
    found = _persistent_id(broker) or str(uuid.uuid4())
    ext[_EXTENSION] = found
    return found


def _persistent_id(broker: Any) -> str | None:
    try:
        persistent = bool(broker.management.persistent)
    except Exception:  # noqa: BLE001 - not started yet, or no management
        persistent = False
    if not persistent:
        return None
    directory = Path(getattr(broker.config, "data_directory", "data") or "data")
    path = directory / FILE_NAME
    try:
        text = path.read_text(encoding="ascii").strip()
        return str(uuid.UUID(text))
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        log.warning("node id file %s is unusable (%s); making a new one", path, exc)
    made = str(uuid.uuid4())
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(made + "\n", encoding="ascii")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot keep the node id in %s (%s): it changes at each restart", path, exc)
    return made
