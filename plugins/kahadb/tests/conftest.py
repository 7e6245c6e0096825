"""Helpers for the kahaDB tests: stores on tmp_path, messages, and a canonical
view of a store's content to compare a store with its recovered self."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.spi.persistence import AddMessage, PersistenceAdapter
from relaymq_kahadb import KahaDBConfig, KahaDBPersistenceAdapter

Opener = Callable[..., Awaitable[KahaDBPersistenceAdapter]]


def config(directory: Path, **kw: Any) -> KahaDBConfig:
    """Test defaults: small files, no background timers (tests drive cleanup), and
    no fsync: these tests are about what is in the files, not about the disk
    (the crash tests and the conformance suite use the real `always`)."""
    base: dict[str, Any] = {
        "directory": str(directory),
        "journal_disk_sync_strategy": "never",
        "journal_max_file_length": 64 << 10,
        "checkpoint_interval": 0,
        "cleanup_interval": 0,
        "cleanup_on_stop": False,
        "compact_acks_after_no_gc": 0,
    }
    base.update(kw)
    return KahaDBConfig(**base)


@pytest.fixture
async def open_store(tmp_path: Path) -> AsyncIterator[Opener]:
    """`await open_store(**config)` -> a started store on tmp_path/kahadb (stopped at the end)."""
    opened: list[KahaDBPersistenceAdapter] = []

    async def opener(directory: Path | None = None, **kw: Any) -> KahaDBPersistenceAdapter:
        s = KahaDBPersistenceAdapter(config(directory or tmp_path / "kahadb", **kw))
        await s.start()
        opened.append(s)
        return s

    yield opener
    for s in reversed(opened):
        await s.stop()


def msg(n: int, size: int = 100, dest: str = "queue://A") -> Message:
    body = f"m{n}:".encode().ljust(size, b".")
    return Message(body, destination=Destination.parse(dest), message_id=f"ID:{n}", durable=True)


def adds(dest: str, seqs: range | list[int], size: int = 100) -> list[AddMessage]:
    return [AddMessage(dest, s, msg(s, size, dest)) for s in seqs]


async def content(store: PersistenceAdapter) -> dict[str, Any]:
    """Everything a store would hand back to a broker, in comparable form."""
    out: dict[str, Any] = {"dests": sorted(await store.destinations()),
                           "subs": sorted((s.key, s.topic, s.selector)
                                          for s in await store.subscriptions())}
    keys = set(out["dests"]) | {k for k, _, _ in out["subs"]}
    for key in sorted(keys):
        stored = await store.read(key)
        out[key] = ([(s.seq, s.message.message_id, s.message.body) for s in stored],
                    (await store.stats(key)).last_seq)
    return out


def data_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("db-*.log"), key=lambda p: int(p.stem.split("-")[1]))
