"""A broker connection's lag in the console: a broker mirroring to another (two
`relaymq run` processes, Artemis' `<amqp-connection><mirror>`), fed over STOMP;
the mirror's replication lag and store-and-forward depth on /api/v1, /metrics and
the broker-connections page in chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from relaymq.testing import free_port, wait_until
from relaymq.testing.console_broker import ADMIN, ConsoleBrokerProcess
from relaymq.testing.processes import RelaymqProcess

from .console_clients import send

pytest.importorskip("relaymq_mirror", reason="relaymq-mirror is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Target(RelaymqProcess):
    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        config = tmp / "target.xml"
        config.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core"
        brokerName="dr" persistent="false">
  <transportConnectors>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{self.port}"/>
  </transportConnectors>
</broker>""")
        super().__init__(config, tmp / "target.log", [self.port])


class Source(ConsoleBrokerProcess):
    def __init__(self, tmp: Path, target_port: int) -> None:
        self.stomp_port = free_port()
        super().__init__(tmp, "primary", attributes=f'dataDirectory="{tmp}/data"', body=f"""
  <persistenceAdapter><kahaDB directory="{tmp}/data/kahadb"/></persistenceAdapter>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
  </transportConnectors>
  <broker-connections>
    <amqp-connection uri="tcp://127.0.0.1:{target_port}" name="DR" retry-interval="200">
      <mirror/>
    </amqp-connection>
  </broker-connections>""")


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mirrored")
    target = Target(tmp).start()
    source = Source(tmp, target.port)
    try:
        source.start()
        yield source
    finally:
        source.stop()
        target.stop()


def dr(source) -> dict:
    r = httpx.get(f"{source.url}/api/v1/broker-connections", auth=ADMIN, timeout=10)
    assert r.status_code == 200, r.text
    return next(c for c in r.json()["items"] if c["name"] == "DR")


def metric(source, family: str) -> float | None:
    text = httpx.get(f"{source.url}/metrics", auth=ADMIN, timeout=10).text
    for f in text_string_to_metric_families(text):
        if f.name == family:
            return next((s.value for s in f.samples if s.labels.get("connection") == "DR"), None)
    return None


def test_a_mirrors_lag_is_on_the_api_and_metrics(mirrored) -> None:
    wait_until(lambda: dr(mirrored)["up"], "the mirror connected", 30)
    send(mirrored, "/queue/mirrored.orders", [f"o{i}" for i in range(5)])
    wait_until(lambda: dr(mirrored)["lag_seconds"] is not None and dr(mirrored)["pending"] == 0,
               "the mirror's copies accepted", 30)
    info = dr(mirrored)
    assert info["lag_seconds"] >= 0
    assert info["detail"]["operations"][0]["accepted"] >= 5
    assert metric(mirrored, "relaymq_broker_connection_lag_seconds") == info["lag_seconds"]
    assert metric(mirrored, "relaymq_broker_connection_pending_messages") == 0
    assert metric(mirrored, "relaymq_broker_connection_up") == 1


@pytest.mark.slow
@pytest.mark.external  # chromium
def test_the_broker_connections_page_shows_the_lag(mirrored, tmp_path_factory) -> None:
    if CHROMIUM is None:
        pytest.skip("chromium (Debian package chromium) is not installed")
    from playwright.sync_api import sync_playwright

    from .console_clients import FLAGS

    send(mirrored, "/queue/mirrored.page", ["p1", "p2"])
    wait_until(lambda: dr(mirrored)["lag_seconds"] is not None and dr(mirrored)["pending"] == 0,
               "the mirror's copies accepted", 30)
    lag = dr(mirrored)["lag_seconds"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page()
            page.goto(f"{mirrored.url}/login")
            page.fill("#username", ADMIN[0])
            page.fill("#password", ADMIN[1])
            page.click("#login-button")
            page.wait_for_selector("#broker-facts")
            page.goto(f"{mirrored.url}/broker-connections")
            headers = page.locator("#items tr").first.locator("th").all_text_contents()
            assert headers[4:6] == ["Lag", "Pending"]
            cell = page.locator("#items tr[data-name=DR] td.lag")
            assert float(cell.get_attribute("data-seconds")) == lag
            shown = cell.text_content()
            expected = f"{lag * 1000:.0f} ms" if lag < 1 else f"{lag:.2f} s"
            assert shown == expected
            assert page.locator("#items tr[data-name=DR] td.pending").text_content() == "0"
            shots = Path(os.environ.get("RELAYMQ_ARTIFACTS") or tmp_path_factory.mktemp("screens"))
            page.screenshot(path=str(shots / "broker-connection-lag.png"), full_page=True)
        finally:
            browser.close()
