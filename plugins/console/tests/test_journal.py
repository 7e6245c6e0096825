"""The store's journal on /metrics and the dashboard: kahaDB's fsyncs, their
latency histogram and its write batches, and the JDBC store's commits, move when
persistent messages are sent over STOMP (real broker processes)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from relaymq.testing import free_port
from relaymq.testing.console_broker import ADMIN, ConsoleBrokerProcess

from .console_clients import send

pytest.importorskip("stomp", reason="stomp.py is not installed")


def journal(url: str) -> dict[str, dict[str, float]]:
    """family -> {sample name + le: value} for the journal's families."""
    text = httpx.get(f"{url}/metrics", auth=ADMIN, timeout=10).text
    out: dict[str, dict[str, float]] = {}
    for f in text_string_to_metric_families(text):
        if f.name.startswith("relaymq_journal_"):
            out[f.name] = {s.name + (f"@{s.labels['le']}" if "le" in s.labels else ""): s.value
                           for s in f.samples}
            out[f.name]["store"] = f.samples[0].labels["store"]  # type: ignore[assignment]
    return out


def check_histogram(samples: dict[str, float], name: str) -> None:
    """Cumulative buckets that end in +Inf at the count."""
    bounds = [(float(k.split("@")[1]), v) for k, v in samples.items() if "@" in k]
    values = [v for _, v in sorted(bounds)]
    assert values == sorted(values), samples
    assert samples[f"{name}_bucket@+Inf"] == samples[f"{name}_count"]


def check_journal_moves(broker, store: str) -> None:
    before = journal(broker.url)
    assert before["relaymq_journal_syncs"]["store"] == store
    send(broker, "/queue/journal.moves", [f"m{i}" for i in range(6)])
    after = journal(broker.url)
    syncs = after["relaymq_journal_syncs"]["relaymq_journal_syncs_total"]
    assert syncs > before["relaymq_journal_syncs"]["relaymq_journal_syncs_total"]
    latency = after["relaymq_journal_sync_seconds"]
    check_histogram(latency, "relaymq_journal_sync_seconds")
    assert latency["relaymq_journal_sync_seconds_count"] == syncs
    assert latency["relaymq_journal_sync_seconds_sum"] > 0
    batches = after["relaymq_journal_batch_records"]
    check_histogram(batches, "relaymq_journal_batch_records")
    was = before["relaymq_journal_batch_records"]
    # the persistent messages were written (the broker may put several in one record)
    assert batches["relaymq_journal_batch_records_sum"] > was["relaymq_journal_batch_records_sum"]
    assert batches["relaymq_journal_batch_records_count"] > \
        was["relaymq_journal_batch_records_count"]
    summary = httpx.get(f"{broker.url}/api/v1/broker", auth=ADMIN, timeout=10).json()
    assert summary["journal_syncs"] >= syncs
    assert summary["journal_sync_ms"] > 0 and summary["journal_batch"] >= 1


def test_kahadb_fsyncs_and_batches_move_with_persistent_sends(console) -> None:
    check_journal_moves(console, "kahadb")


class JdbcBroker(ConsoleBrokerProcess):
    def __init__(self, tmp: Path) -> None:
        self.stomp_port = free_port()
        super().__init__(tmp, "jdbc-journal", attributes=f'dataDirectory="{tmp}/data"', body=f"""
  <persistenceAdapter><jdbcPersistenceAdapter url="sqlite:///{tmp}/store.sqlite"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
  </transportConnectors>""")


def test_jdbc_commits_and_batches_move_with_persistent_sends(tmp_path) -> None:
    pytest.importorskip("relaymq_jdbc", reason="relaymq-jdbc is not installed")
    broker = JdbcBroker(tmp_path).start()
    try:
        check_journal_moves(broker, "jdbc")
    finally:
        broker.stop()


@pytest.mark.slow
@pytest.mark.external  # chromium
def test_the_dashboard_shows_the_journal_moving(console, tmp_path_factory) -> None:
    import os
    import shutil

    from relaymq.testing import wait_until

    from .console_clients import FLAGS

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium (Debian package chromium) is not installed")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
        try:
            page = browser.new_page()
            page.goto(f"{console.url}/login")
            page.fill("#username", ADMIN[0])
            page.fill("#password", ADMIN[1])
            page.click("#login-button")
            page.wait_for_selector("#broker-facts")

            def syncs() -> int:
                return int(page.text_content("[data-live=journal_syncs]").strip())

            before = syncs()
            assert float(page.text_content("[data-live=journal_batch]").strip()) >= 0
            send(console, "/queue/journal.dashboard", ["d1", "d2", "d3"])
            # the page refreshes by itself (every refreshInterval, 5 s by default)
            wait_until(lambda: syncs() > before, "the dashboard's journal syncs to grow", 30)
            assert float(page.text_content("[data-live=journal_sync_ms]").strip()) > 0
            shots = Path(os.environ.get("RELAYMQ_ARTIFACTS") or tmp_path_factory.mktemp("screens"))
            page.screenshot(path=str(shots / "dashboard-journal.png"), full_page=True)
        finally:
            browser.close()
