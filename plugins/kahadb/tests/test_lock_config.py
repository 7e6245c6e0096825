"""The lock file and the `<kahaDB>` element's attributes."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from relaymq.config.model import Origin, PluginElement
from relaymq.errors import ConfigError
from relaymq.testing import wait_until_async
from relaymq_kahadb import KahaDBConfig, KahaDBPersistenceAdapter
from relaymq_kahadb.errors import MissingJournalFiles
from relaymq_kahadb.lock import StoreLockedError

from .conftest import Opener, adds, config


async def test_second_store_on_the_directory_fails_clearly(open_store: Opener, tmp_path: Path) -> None:
    await open_store()
    other = KahaDBPersistenceAdapter(KahaDBConfig(directory=str(tmp_path / "kahadb")))
    with pytest.raises(StoreLockedError, match=rf"locked by another broker \(pid={os.getpid()} "
                                               r"host=.*failIfLocked=\"false\""):
        await other.start()


async def test_waiting_for_the_lock(open_store: Opener, tmp_path: Path,
                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "relaymq_kahadb")
    first = await open_store()
    await first.write(adds("queue://A", [1]))
    second = KahaDBPersistenceAdapter(KahaDBConfig(
        directory=str(tmp_path / "kahadb"), fail_if_locked=False, lock_acquire_sleep_interval=20,
        cleanup_interval=0, checkpoint_interval=0))
    starting = asyncio.create_task(second.start())
    await wait_until_async(lambda: "this broker is a slave" in caplog.text, "the second to wait")
    assert not starting.done()  # waiting, as a shared-storage slave does
    await first.stop()
    await asyncio.wait_for(starting, 5)
    try:
        assert [m.seq for m in await second.read("queue://A")] == [1]
    finally:
        await second.stop()


async def test_the_lock_is_released_on_stop_and_after_failed_start(tmp_path: Path) -> None:
    d = tmp_path / "kahadb"

    def adapter(**kw: object) -> KahaDBPersistenceAdapter:
        return KahaDBPersistenceAdapter(config(d, **kw))

    s = adapter()
    await s.start()
    for first in range(1, 201, 10):  # more than one 64 KiB journal file
        await s.write(adds("queue://A", range(first, first + 10), size=1000))
    with pytest.raises(StoreLockedError):  # held while running
        await adapter().start()
    await s.stop()
    await s.stop()  # twice is harmless
    s = adapter()
    await s.start()  # released on stop
    await s.stop()
    # a start that fails after taking the lock: a journal file with a live message is gone
    (d / "db-1.log").unlink()
    with pytest.raises(MissingJournalFiles):
        await adapter(ignore_missing_journalfiles=False).start()
    s = adapter(ignore_missing_journalfiles=True)
    await s.start()  # released after the failed start
    try:
        assert 0 < len(await s.read("queue://A")) < 200  # without the first file's messages
    finally:
        await s.stop()


def element(**attrs: str) -> PluginElement:
    return PluginElement("kahaDB", attributes=attrs, origin=Origin("activemq.xml", 14))


def test_activemq_attributes_are_typed() -> None:
    broker = SimpleNamespace(config=SimpleNamespace(data_directory="/var/lib/relaymq"), plugins=None)
    store = KahaDBPersistenceAdapter.from_element(element(
        journalMaxFileLength="16mb", journalDiskSyncStrategy="PERIODIC",
        journalDiskSyncInterval="250", checkpointInterval="1000", cleanupInterval="5000",
        enableAckCompaction="false", preallocationStrategy="zeros",
        concurrentStoreAndDispatchQueues="false", indexCacheSize="20000"), broker)
    c = store.config
    assert (c.journal_max_file_length, c.journal_disk_sync_strategy, c.journal_disk_sync_interval) == (
        16 << 20, "periodic", 250)
    assert not c.enable_ack_compaction and c.preallocation_strategy == "zeros"
    assert store.directory == Path("/var/lib/relaymq/kahadb")  # ActiveMQ's ${activemq.data}/kahadb
    assert store.concurrent_store_and_dispatch_queues is False
    assert any("indexCacheSize" in line for line in c.ignored_settings())


def test_enable_journal_disk_syncs_false_means_never() -> None:
    store = KahaDBPersistenceAdapter.from_element(element(directory="x", enableJournalDiskSyncs="false"))
    assert store.config.journal_disk_sync_strategy == "never"


@pytest.mark.parametrize("attrs, needle", [
    ({"journalDiskSyncStrategy": "sometimes"}, "journalDiskSyncStrategy"),
    ({"journalMaxFileLength": "8gb"}, "journalMaxFileLength"),
    ({"journalMaxFileLength": "lots"}, "journalMaxFileLength"),
    ({"preallocationScope": "planet"}, "preallocationScope"),
    ({"cleanupInterval": "-5"}, "cleanupInterval=-5"),
    ({"checkpointInterval": "-1"}, "checkpointInterval=-1"),
    ({"compactAcksAfterNoGC": "-2"}, "compactAcksAfterNoGC=-2"),
    ({"journalMaxWriteBatchSize": "0"}, "journalMaxWriteBatchSize=0"),
    ({"indexCacheSize": "many"}, "indexCacheSize"),
    ({"archiveDataLogs": "maybe"}, "archiveDataLogs"),
])
def test_bad_values_name_the_attribute_and_the_line(attrs: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=rf"(?s){needle}.*activemq.xml:14|activemq.xml:14.*{needle}"):
        KahaDBPersistenceAdapter.from_element(element(**attrs))


async def test_settings_without_effect_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "relaymq")
    store = KahaDBPersistenceAdapter.from_element(element(
        directory=str(tmp_path), indexCacheSize="50000", noSuchThing="1"))
    await store.start()
    await store.stop()
    assert "indexCacheSize=50000 has no effect" in caplog.text
    assert "noSuchThing" in caplog.text


def test_config_check_warns_about_kahadb_attributes_it_ignores(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from relaymq.cli import main

    path = tmp_path / "activemq.xml"
    path.write_text(f"""<broker brokerName="b1">
  <persistenceAdapter><kahaDB directory="{tmp_path}/kahadb" foo="1"/></persistenceAdapter>
</broker>""")
    result = CliRunner().invoke(main, ["config", "check", "--allow-vm-only", str(path)])
    assert result.exit_code == 0, result.output
    assert f"<kahaDB> at {path}:2: attribute 'foo' is ignored" in result.output
    assert not (tmp_path / "kahadb").exists()  # checking builds nothing


def test_config_check_lists_what_the_store_would_log_as_having_no_effect(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from relaymq.cli import main

    path = tmp_path / "activemq.xml"
    path.write_text(f"""<broker brokerName="b1">
  <persistenceAdapter><kahaDB directory="{tmp_path}/kahadb" enableIndexWriteAsync="true"/></persistenceAdapter>
</broker>""")
    result = CliRunner().invoke(main, ["config", "check", "--allow-vm-only", str(path)])
    assert result.exit_code == 0, result.output
    assert f"<kahaDB> at {path}:2: enableIndexWriteAsync=True has no effect" in result.output


def test_shared_file_locker_in_xml_and_yaml_makes_the_broker_wait(tmp_path: Path) -> None:
    from relaymq.config import load_config_text

    xml = f"""<beans><broker xmlns="http://activemq.apache.org/schema/core" brokerName="b1">
  <persistenceAdapter>
    <kahaDB directory="{tmp_path}/kahadb">
      <locker><shared-file-locker lockAcquireSleepInterval="1500"/></locker>
    </kahaDB>
  </persistenceAdapter>
</broker></beans>"""
    yaml = f"""broker:
  brokerName: b1
  persistenceAdapter:
    kahaDB:
      directory: {tmp_path}/kahadb
      locker:
        shared-file-locker: {{lockAcquireSleepInterval: 1500}}
"""
    for text, kind in ((xml, "xml"), (yaml, "yaml")):
        config = load_config_text(text, kind)
        assert config.persistence_adapter is not None
        assert not any("locker" in w for w in config.warnings), config.warnings
        store = KahaDBPersistenceAdapter.from_element(config.persistence_adapter,
                                                      SimpleNamespace(config=config, plugins=None))
        assert store.config.fail_if_locked is False  # ActiveMQ's locker waits as a slave
        assert store.config.lock_acquire_sleep_interval == 1500
        assert store._lock.owner == "b1"


def test_shared_file_locker_fail_if_locked() -> None:
    el = element(directory="x")
    el.children.append(PluginElement("locker", children=[
        PluginElement("shared-file-locker", {"failIfLocked": "true"})]))
    assert KahaDBPersistenceAdapter.from_element(el).config.fail_if_locked is True


@pytest.mark.parametrize("inner, needle", [
    ([PluginElement("lease-database-locker")], "holds <lease-database-locker>; kahaDB takes "
                                               "<shared-file-locker>"),
    ([], "holds nothing"),
    ([PluginElement("shared-file-locker", {"lockAcquireSleepInterval": "0"})],
     "lockAcquireSleepInterval=0: must be positive"),
    ([PluginElement("shared-file-locker", {"lockAcquireSleepInterval": "soon"})],
     "lockAcquireSleepInterval"),
])
def test_bad_lockers_are_refused(inner: list[PluginElement], needle: str) -> None:
    el = element(directory="x")
    el.children.append(PluginElement("locker", children=inner))
    with pytest.raises(ConfigError, match=needle):
        KahaDBPersistenceAdapter.from_element(el)
