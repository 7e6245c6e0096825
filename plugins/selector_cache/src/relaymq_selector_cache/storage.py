"""The ``persistFile``: JSON, written atomically, never trusted to be well formed.

ActiveMQ wrote this cache with Java serialization, which needed a
deserialization filter to be safe to read. RelayMQ writes plain JSON::

    {"format": "relaymq-selector-cache", "version": 1,
     "destinations": {"queue://Consumer.A.VirtualTopic.Orders":
                        [{"selector": "TRUE"}, {"selector": "price > 5"}]}}

A write goes to a temporary file in the same directory, is fsynced, and then
renamed over the old file, so a crash leaves the old or the new cache, never
half of one. A file that cannot be read as such a document is a `CorruptCache`;
the plugin moves it aside and starts empty rather than refusing to start.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from relaymq_selector_cache.cache import CachedSelector, parse_entry

FORMAT = "relaymq-selector-cache"
VERSION = 1

_JAVA_SERIALIZATION_MAGIC = b"\xac\xed"


class CorruptCache(ValueError):
    """The persist file exists but is not a selector cache RelayMQ can read."""


def read_cache(path: Path) -> tuple[dict[str, list[CachedSelector]], list[str]] | None:
    """Read `path`: (destinations, problems with single entries), or None if absent.

    Entries that are individually bad (an invalid selector) are skipped and
    reported; a file that is not a cache document at all raises `CorruptCache`.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptCache(f"cannot read it: {exc.strerror or exc}") from exc
    if data.startswith(_JAVA_SERIALIZATION_MAGIC):
        raise CorruptCache("it is a Java-serialized (ActiveMQ) selector cache; RelayMQ never "
                           "reads Java serialization, and re-learns selectors as consumers "
                           "subscribe")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptCache(f"it is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CorruptCache(f"it is JSON but not a RelayMQ selector cache (no \"format\": "
                           f"\"{FORMAT}\")")
    if doc.get("version") != VERSION:
        raise CorruptCache(f"its version {doc.get('version')!r} is not {VERSION}; it was "
                           "written by another RelayMQ version")
    destinations = doc.get("destinations")
    if not isinstance(destinations, dict):
        raise CorruptCache("its \"destinations\" is not an object")
    out: dict[str, list[CachedSelector]] = {}
    problems: list[str] = []
    for key, raw_entries in destinations.items():
        if not isinstance(raw_entries, list):
            problems.append(f"{key}: expected a list of selectors")
            continue
        entries = []
        for raw in raw_entries:
            try:
                entries.append(parse_entry(raw))
            except ValueError as exc:
                problems.append(f"{key}: {exc}")
        if entries:
            out[key] = entries
    return out, problems


def document(destinations: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "destinations": destinations}


def write_atomic(path: Path, doc: dict[str, Any]) -> None:
    """Write `doc` to `path` so that a crash leaves the old or the new file whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def move_aside(path: Path) -> Path:
    """Rename a bad persist file to ``<name>.corrupt-<timestamp>`` and return the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, target)
    return target


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories can't be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
