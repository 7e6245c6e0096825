"""persistFile: survives a restart, written atomically as JSON, corrupt files set aside."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from relaymq.client import connect_broker
from relaymq.errors import ConfigError
from relaymq.testing.barriers import before_marker
from relaymq_selector_cache.storage import FORMAT, VERSION

pytest.importorskip("relaymq_virtual_topic")

ORDERS = "topic://VirtualTopic.Orders"
A = "queue://Consumer.A.VirtualTopic.Orders"


def plugin(path: Path, **attrs: str) -> str:
    extra = " ".join(f'{k}="{v}"' for k, v in attrs.items())
    return f'<plugins><virtualSelectorCacheBrokerPlugin persistFile="{path}" {extra}/></plugins>'


async def learn(broker, queue: str, selector: str | None) -> None:
    conn = await connect_broker(broker)
    await (await conn.consumer(queue, selector=selector)).close()
    await conn.close()


async def test_the_cache_survives_a_broker_restart(start, texts, tmp_path):
    path = tmp_path / "data" / "selectorcache.json"
    first = await start(plugin(path))
    await learn(first, A, "color = 'red'")
    await first.stop()
    assert json.loads(path.read_text())["destinations"] == {A: [{"selector": "color = 'red'"}]}

    second = await start(plugin(path))  # a new Broker object on the same persistFile
    conn = await connect_broker(second)
    for color in ("red", "blue"):
        await conn.send(ORDERS, color, properties={"color": color})
    assert second.queue_size("Consumer.A.VirtualTopic.Orders") == 1
    assert await texts(await conn.consumer(A, selector="color = 'red'"),
                       properties={"color": "red"}) == ["red"]


async def test_writes_happen_while_running_and_are_atomic(start, tmp_path):
    path = tmp_path / "selectorcache.json"
    broker = await start(plugin(path))
    await learn(broker, A, "a = 1")
    await broker.extensions["selector-cache"].flush()
    doc = json.loads(path.read_text())
    assert doc == {"format": FORMAT, "version": VERSION,
                   "destinations": {A: [{"selector": "a = 1"}]}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["selectorcache.json"]  # no temp left


async def test_changes_between_writes_share_one_write(start, tmp_path, monkeypatch):
    import relaymq_selector_cache.plugin as plugin_module

    writes = []
    real = plugin_module.write_atomic
    monkeypatch.setattr(plugin_module, "write_atomic",
                        lambda p, doc: (writes.append(doc), real(p, doc)))
    path = tmp_path / "selectorcache.json"
    broker = await start(plugin(path, persistInterval="50"))
    conn = await connect_broker(broker)
    for i in range(5):
        await (await conn.consumer(A, selector=f"n = {i}")).close()
    await broker.extensions["selector-cache"].flush()
    assert len(writes) == 1
    assert len(json.loads(path.read_text())["destinations"][A]) == 5


async def test_a_corrupt_file_is_moved_aside_and_the_cache_starts_empty(start, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    path = tmp_path / "selectorcache.json"
    path.write_text('{"format": "relaymq-selector-cache", "version": 1, "destinations": {')
    broker = await start(plugin(path))
    assert broker.started
    moved = broker.extensions["selector-cache"].moved_aside
    assert moved is not None and moved.name.startswith("selectorcache.json.corrupt-")
    assert moved.read_text().endswith('"destinations": {')  # kept for inspection
    assert not path.exists()
    assert len(broker.extensions["selector-cache"].cache) == 0
    warning = next(r.getMessage() for r in caplog.records if "unusable" in r.getMessage())
    assert str(path) in warning and str(moved) in warning and "not JSON" in warning
    await learn(broker, A, "a = 1")  # and the cache works from there on
    await broker.extensions["selector-cache"].flush()
    assert json.loads(path.read_text())["destinations"] == {A: [{"selector": "a = 1"}]}


@pytest.mark.parametrize(("content", "reason"), [
    (b"\xac\xed\x00\x05sr\x00&java.util.concurrent.ConcurrentHashMap", "Java-serialized"),
    (b"\xff\xfe not utf-8", "not JSON"),
    (b'["a list"]', "not a RelayMQ selector cache"),
    (b'{"format": "relaymq-selector-cache", "version": 99, "destinations": {}}', "version 99"),
    (b'{"format": "relaymq-selector-cache", "version": 1, "destinations": []}', "not an object"),
])
async def test_unusable_files(start, tmp_path, caplog, content, reason):
    caplog.set_level(logging.WARNING)
    path = tmp_path / "selectorcache.data"
    path.write_bytes(content)
    broker = await start(plugin(path))
    assert broker.extensions["selector-cache"].moved_aside.read_bytes() == content
    assert any(reason in r.getMessage() for r in caplog.records)


async def test_bad_entries_are_skipped_and_the_rest_is_kept(start, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    path = tmp_path / "selectorcache.json"
    path.write_text(json.dumps({"format": FORMAT, "version": VERSION, "destinations": {
        A: [{"selector": "color = 'red'"}, {"selector": "color = "}, "size > 3",
            {"selector": "x = 1", "stringConversion": "yes"}],
        "queue://Other": "not a list",
    }}))
    broker = await start(plugin(path))
    cache = broker.extensions["selector-cache"]
    assert cache.moved_aside is None
    assert [e.text for e in cache.cache.entries(A)] == ["color = 'red'", "size > 3"]
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "invalid selector 'color = '" in messages
    assert "queue://Other: expected a list" in messages


async def test_a_directory_is_a_configuration_error(start, tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        await start(plugin(tmp_path))
    assert tmp_path.is_dir()


async def test_start_up_logs_the_cache_contents(start, tmp_path, caplog):
    path = tmp_path / "selectorcache.json"
    path.write_text(json.dumps({"format": FORMAT, "version": VERSION, "destinations": {
        A: [{"selector": "TRUE"}, {"selector": "price > 5", "stringConversion": True}]}}))
    caplog.set_level(logging.INFO, logger="relaymq.selector_cache")
    await start(plugin(path))
    lines = [r.getMessage() for r in caplog.records]
    assert f"selector cache ({path}): 2 selector(s) for 1 queue(s)" in lines
    assert f"selector cache: {A}: TRUE, 'price > 5' (string conversion)" in lines


async def test_an_unwritable_location_does_not_stop_the_broker(start, tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    path = blocker / "selectorcache.json"  # its parent is a file: every write fails
    broker = await start(plugin(path))
    caplog.set_level(logging.ERROR)
    await learn(broker, A, "a = 1")
    await broker.extensions["selector-cache"].flush()
    assert any("cannot write" in r.getMessage() for r in caplog.records)
    assert broker.started
    assert [e.text for e in broker.extensions["selector-cache"].cache.entries(A)] == ["a = 1"]


async def test_restart_with_a_persistent_store(tmp_path):
    """With kahaDB the consumer queue and its messages survive too: the real setup."""
    pytest.importorskip("relaymq_kahadb")
    from relaymq.broker.broker import Broker
    from relaymq.config.loader import load_config_text

    xml = f"""<broker xmlns="http://activemq.apache.org/schema/core">
      <persistenceAdapter><kahaDB directory="{tmp_path}/kahadb"/></persistenceAdapter>
      <plugins><virtualSelectorCacheBrokerPlugin persistFile="{tmp_path}/selectorcache.json"/>
      </plugins>
      <destinationInterceptors><virtualDestinationInterceptor><virtualDestinations>
        <virtualTopic name="VirtualTopic.>" prefix="Consumer.*." selectorAware="true"/>
      </virtualDestinations></virtualDestinationInterceptor></destinationInterceptors>
    </broker>"""

    async def publish(conn, *colors: str) -> None:
        for color in colors:
            await conn.send(ORDERS, f"{color}", persistent=True, properties={"color": color})

    first = Broker(load_config_text(xml, strict=True), strict=True)
    await first.start()
    conn = await connect_broker(first)
    await (await conn.consumer(A, selector="color = 'red'")).close()
    await publish(conn, "red", "blue")
    await first.stop()

    second = Broker(load_config_text(xml, strict=True), strict=True)
    await second.start()
    try:
        conn = await connect_broker(second)
        await publish(conn, "red", "blue")  # before the consumer is back
        back = await conn.consumer(A, selector="color = 'red'")
        assert await before_marker(conn, A, back, properties={"color": "red"}) == ["red", "red"]
        assert second.queue_size("Consumer.A.VirtualTopic.Orders") == 0
    finally:
        await second.stop()
