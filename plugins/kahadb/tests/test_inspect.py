"""`relaymq kahadb inspect DIR` explains every data file."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path

from click.testing import CliRunner
from relaymq.spi.persistence import (
    AddDestination,
    AddSubscription,
    RemoveMessage,
    SubscriptionRecord,
)
from relaymq_kahadb.cli import kahadb

from .conftest import Opener, adds

F = "queue://fast"
S = "queue://slow"


async def build(open_store: Opener) -> None:
    """Files kept by a stuck message, files kept only by acks, and dead files."""
    store = await open_store(journal_max_file_length=64 << 10, compaction_threshold=0.0,
                             compact_acks_after_no_gc=100)
    sub = SubscriptionRecord("c", "s", "topic://T", selector="x = 1")
    await store.write([AddDestination(F), AddDestination(S), AddSubscription(sub)])
    await store.write(adds(S, [1, 2], 1000) + adds(sub.key, [1], 10))
    seq = 1
    for _ in range(70):
        await store.write(adds(F, [seq], 1000))
        await store.write([RemoveMessage(F, seq)])
        seq += 1
    await store.write([RemoveMessage(S, 2)])  # an ack in a later file, into db-1.log
    for _ in range(140):
        await store.write(adds(F, [seq], 1000))
        await store.write([RemoveMessage(F, seq)])
        seq += 1
    await store.cleaner.run()
    await store.stop()


async def test_inspect_explains_each_file(open_store: Opener, tmp_path: Path) -> None:
    await build(open_store)
    d = tmp_path / "kahadb"
    result = CliRunner().invoke(kahadb, ["inspect", str(d)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "db-1.log" in out and "kept alive by 2 live message(s)" in out
    assert "queue://slow (1)" in out and "durable://c:s (1)" in out
    assert "kept by acks: its removals refer to messages in db-1.log" in out
    assert "the tail: being written" in out
    assert "queue://slow [destination]: 1 message(s)" in out
    assert "durable://c:s [subscription]" in out and "selector 'x = 1'" in out
    assert "lock: free" in out and "checkpoint: covers the journal up to" in out


async def test_inspect_json_and_quick(open_store: Opener, tmp_path: Path) -> None:
    await build(open_store)
    d = tmp_path / "kahadb"
    result = CliRunner().invoke(kahadb, ["inspect", "--json", "--quick", str(d)])
    assert result.exit_code == 0, result.output
    rep = json.loads(result.output)
    first = rep["files"][0]
    assert first["name"] == "db-1.log" and first["live_messages"] == 2
    assert first["records"] is None  # --quick does not read every file
    assert sum(f["live_messages"] for f in rep["files"]) == rep["live_messages"] == 2
    pinned = [f for f in rep["files"] if f["pins"] == [1]]
    assert pinned and all(f["live_messages"] == 0 for f in pinned)


async def test_inspect_a_running_store(open_store: Opener, tmp_path: Path) -> None:
    store = await open_store()
    await store.write(adds(S, [1, 2, 3]))
    result = CliRunner().invoke(kahadb, ["inspect", str(tmp_path / "kahadb")])
    assert result.exit_code == 0, result.output
    assert "lock: held by pid=" in result.output
    assert "queue://slow [destination]: 3 message(s)" in result.output


def test_the_cli_entry_point_is_registered() -> None:
    eps = {ep.name: ep.value for ep in entry_points(group="relaymq.cli")}
    assert eps.get("kahadb") == "relaymq_kahadb.cli:kahadb"
    pers = {ep.name: ep.value for ep in entry_points(group="relaymq.persistence")}
    assert pers.get("kahaDB") == "relaymq_kahadb.adapter:KahaDBPersistenceAdapter"
